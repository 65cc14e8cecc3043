"""Python numbers a branch changes, carried through ``torch.cond``.

torch.cond (2.14) takes tensors only as operands, and returns tensors, ints and bools (an
int or bool result becomes an unbacked symbol); a Python float is neither. So a branch that
changes a count or a scale::

    n, scale = 0, 1.0
    if h.sum() > 0:
        n += 2
        scale = scale * 0.5

passes its non-tensor operands to the arms through their closure (each arm sees the very
value, concrete or symbolic), returns ints and bools as torch.cond does, and returns each
float that was a float operand as a 0-d float64 tensor, read back with ``.item()`` after
the cond (a symbolic float in the graph). An arm that changes a value's kind (an int to a
float) fails to trace and the branch is refused with torch.cond's message.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.utils._pytree as pytree

_FLOAT = (float, torch.SymFloat)


def _all_tensors(value) -> bool:
    return all(isinstance(v, torch.Tensor) for v in pytree.tree_leaves(value))


def split_python_values(true_fn: Callable, false_fn: Callable, operands: tuple,
                        ins: tuple[str, ...], outs: tuple[str, ...]):
    """``(true_fn, false_fn, tensor_operands, floats)``: the arms taking the tensor operands
    only (the others put back in their places from the closure), and the output positions
    holding floats returned as tensors (``floats``, for ``read_back``). Unchanged when every
    operand is made of tensors."""
    fixed = {i: o for i, o in enumerate(operands) if not _all_tensors(o)}
    if not fixed:
        return true_fn, false_fn, operands, frozenset()
    kept = [i for i in range(len(operands)) if i not in fixed]
    floats = frozenset(outs.index(ins[i]) for i, o in fixed.items()
                       if isinstance(o, _FLOAT) and i < len(ins) and ins[i] in outs)

    def arm(fn: Callable) -> Callable:
        def run(*tensors):
            full = list(operands)
            for i, t in zip(kept, tensors, strict=True):
                full[i] = t
            out = fn(*full)
            return tuple(torch.scalar_tensor(v, dtype=torch.float64)
                         if j in floats and isinstance(v, _FLOAT) else v
                         for j, v in enumerate(out))
        run.__name__ = getattr(fn, "__name__", "arm")
        return run

    return arm(true_fn), arm(false_fn), tuple(operands[i] for i in kept), floats


def read_back(values: tuple, floats: frozenset[int]) -> tuple:
    """The cond's outputs with each float position read back as a Python (symbolic) float."""
    if not floats:
        return values
    return tuple(v.item() if j in floats and isinstance(v, torch.Tensor) else v
                 for j, v in enumerate(values))
