"""``torch.while_loop`` as rewritten loops call it: Python numbers among the carried values
travel as 0-d tensors where the loop needs every carried value to be a tensor."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .rt_lift import lifted
from .rt_raising import NestedDataBranch
from .rt_state import RT, in_traced_body
from .rt_values import trace_unaliased

_NUMBER_DTYPES = ((bool, torch.bool), (int, torch.int64), (float, torch.float64))


def carried_while_loop(cond_fn: Callable, step: Callable, carried: tuple) -> tuple:
    """``torch.while_loop``; where autograd records it (grad mode on: a carried tensor or a
    parameter the body reads may need grad), or a float is carried, its carried values must
    all be tensors, so
    Python numbers travel as 0-d tensors (int64, float64, bool: exact) and come back as the
    loop's symbolic numbers."""
    from torch._higher_order_ops import while_loop

    if RT.raise_probe:  # an arm run to see whether it raises holds a loop on data
        raise NestedDataBranch
    tensors = [c for c in carried if isinstance(c, torch.Tensor)]
    numbers = {i: next(d for t, d in _NUMBER_DTYPES if isinstance(c, t))
               for i, c in enumerate(carried) if isinstance(c, bool | int | float)}
    # neither Dynamo's while_loop (the census) nor torch.export's takes a float; and a
    # Python bool it carries as an int (a symbol of its own: ``u >= 0`` asserted, int64
    # where a cond merges it with a bool)
    # where ``.item()`` of the result would be a break (Dynamo's census, scalar reads not
    # captured), a bool is carried as Dynamo's while_loop carries it: no merge happens there
    bools = any(d is torch.bool for d in numbers.values()) and not _item_breaks()
    floats = bools or any(d is torch.float64 for d in numbers.values())
    if not numbers or not (torch.is_grad_enabled() or floats):
        with in_traced_body():
            return lifted(lambda: trace_unaliased(lambda: while_loop(cond_fn, step, carried)))
    device = tensors[0].device if tensors else None

    def as_tensors(values) -> tuple:
        # ``full``, not ``torch.tensor``: a fake tensor made from a Python value is a
        # constant to torch, and torch.cond's trace (Dynamo) then reads the loop's output
        # as the constant the body makes of it, as if the loop always ran once (torch
        # 2.14.1; experiments/repro_while_loop_constant.py)
        return tuple(torch.full((), v, dtype=numbers[i], device=device)
                     if i in numbers and not isinstance(v, torch.Tensor) else v
                     for i, v in enumerate(values))

    with in_traced_body():
        out = lifted(lambda: trace_unaliased(lambda: while_loop(
            cond_fn, lambda *state: as_tensors(step(*state)), as_tensors(carried))))
    return tuple(o.item() if i in numbers else o for i, o in enumerate(out))


def _item_breaks() -> bool:
    """Whether ``.item()`` here is a graph break: under Dynamo with scalar reads not
    captured (the census; torch.cond's and while_loop's own traces capture them)."""
    return torch.compiler.is_dynamo_compiling() and \
        not torch._dynamo.config.capture_scalar_outputs
