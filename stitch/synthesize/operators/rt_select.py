"""The traced branch itself: ``torch.where`` over both arms where they agree and are pure,
else ``torch.cond``, traced again on copies where two of its inputs share memory."""

from __future__ import annotations

from collections.abc import Callable

import torch

from capture import torch_messages as tm

from .rt_lift import lifted
from .rt_raising import NestedDataBranch
from .rt_state import RT, in_traced_body
from .rt_values import same_kind, same_meta_tensors, trace_unaliased


def select(predicate, true_fn, false_fn, operands, mode) -> tuple:
    if RT.raise_probe:  # an arm run to see whether it raises holds a branch on data
        raise NestedDataBranch
    with in_traced_body():
        if mode == "where":
            t, f = true_fn(*operands), false_fn(*operands)
            if all(same_meta_tensors(a, b) for a, b in zip(t, f, strict=True)):
                # a read both arms give as one (``k * 2`` or ``k``) stays marked as a read
                return tuple(same_kind(torch.where(predicate, a, b), a, b)
                             for a, b in zip(t, f, strict=True))
        return _traced_cond(predicate, true_fn, false_fn, operands)


def _traced_cond(predicate, true_fn, false_fn, operands) -> tuple:
    try:
        return tuple(lifted(lambda: trace_unaliased(lambda: torch.cond(
            predicate, true_fn, false_fn, tuple(operands)))))
    except Exception as e:
        if not tm.matches(tm.COND_INPUT_ALIASING, str(e)):
            raise
    # two inputs of the cond share memory (views of one tensor the branches read through
    # their closure: ``w.chunk(n)``, ``qkv.unbind()``): trace again on copies
    t, f = _own_inputs(true_fn), _own_inputs(false_fn)
    ops = tuple(o.clone() if isinstance(o, torch.Tensor) else o for o in operands)
    return tuple(lifted(lambda: trace_unaliased(lambda: torch.cond(predicate, t, f, ops))))


def _own_inputs(fn: Callable, seen: dict | None = None) -> Callable:
    """``fn`` reading copies of the tensors its closure holds (also inside lists, tuples and
    dicts, and in the closures of the functions it holds: an arm wrapped to carry numbers
    holds the branch's own function): the branch reads the same values, from memory no
    other input shares."""
    import types

    import torch.utils._pytree as pytree

    seen = {} if seen is None else seen
    if not isinstance(fn, types.FunctionType) or not fn.__closure__:
        return fn
    if id(fn) in seen:  # a function reached again (recursion through its own closure)
        return seen[id(fn)]
    cells = []
    for cell in fn.__closure__:
        try:
            value = cell.cell_contents
        except ValueError:  # an unbound cell stays unbound
            cells.append(cell)
            continue
        if isinstance(value, torch.Tensor | list | tuple | dict):
            value = pytree.tree_map_only(torch.Tensor, lambda t: t.clone(), value)
        elif isinstance(value, types.FunctionType):
            seen[id(fn)] = fn  # while its cells are copied
            value = _own_inputs(value, seen)
        cells.append(types.CellType(value))
    own = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__,
                             tuple(cells))
    seen[id(fn)] = own
    return own
