"""Python numbers a branch changes or returns, carried through ``torch.cond``.

torch.cond (2.14) takes tensors only as operands, and returns tensors, ints and bools (an
int or bool result becomes an unbacked symbol); a Python float is neither. So a branch that
changes a count or a scale, or returns through a continuation a tuple holding them::

    n, scale = 0, 1.0
    if h.sum() > 0:
        n += 2
        scale = scale * 0.5

passes its non-tensor operands to the arms through their closure (each arm sees the very
value, concrete or symbolic), returns ints and bools as torch.cond does, and returns each
float as a 0-d float64 tensor, read back with ``.item()`` after the cond (a symbolic float
in the graph). Which output leaves are floats is what the eager runs of the rewritten model
saw (the census runs it eagerly before anything is traced): tracing must not record it, as
a branch traced by torch.cond may not change state outside itself. An arm that gives a
value of another kind than the eager run saw fails to trace; the branch is then refused
with torch.cond's message.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.utils._pytree as pytree

_FLOAT = (float, torch.SymFloat)
# per branch (its true arm, by file, line and name: torch.compile guards on the key, and
# cannot name a code object): the output leaves that were floats when it ran eagerly
FLOAT_LEAVES: dict[str, frozenset[int]] = {}


def _key(fn: Callable) -> str | None:
    code = getattr(fn, "__code__", None)
    return None if code is None else f"{code.co_filename}:{code.co_firstlineno}:{code.co_name}"


def _all_tensors(value) -> bool:
    return all(isinstance(v, torch.Tensor) for v in pytree.tree_leaves(value))


def seen_eagerly(true_fn: Callable, outputs) -> None:
    """Note which leaves of a branch's outputs are Python floats (an eager run)."""
    key = _key(true_fn)
    if key is None:
        return
    floats = frozenset(i for i, v in enumerate(pytree.tree_leaves(outputs))
                       if isinstance(v, _FLOAT))
    if floats or key in FLOAT_LEAVES:
        FLOAT_LEAVES[key] = FLOAT_LEAVES.get(key, frozenset()) | floats


def split_python_values(true_fn: Callable, false_fn: Callable, operands: tuple,
                        floats: frozenset[int] | None = None):
    """``(true_fn, false_fn, tensor_operands, floats)``: the arms taking the tensor operands
    only (the others put back in their places from the closure) and returning each float
    leaf the eager runs saw as a 0-d float64 tensor; ``floats``, those leaves, for
    ``read_back``. Unchanged when there is nothing to carry. ``floats``: known already (a
    branch whose arms were probed), else what the eager runs saw."""
    if floats is None:
        floats = FLOAT_LEAVES.get(_key(true_fn), frozenset())
    fixed = {i: o for i, o in enumerate(operands) if not _all_tensors(o)}
    if not fixed and not floats:
        return true_fn, false_fn, operands, floats
    kept = [i for i in range(len(operands)) if i not in fixed]

    def arm(fn: Callable) -> Callable:
        def run(*tensors):
            full = list(operands)
            for i, t in zip(kept, tensors, strict=True):
                full[i] = t
            leaves, spec = pytree.tree_flatten(fn(*full))
            leaves = [torch.scalar_tensor(v, dtype=torch.float64)
                      if i in floats and isinstance(v, _FLOAT) else v
                      for i, v in enumerate(leaves)]
            return pytree.tree_unflatten(leaves, spec)
        run.__name__ = getattr(fn, "__name__", "arm")
        return run

    return arm(true_fn), arm(false_fn), tuple(operands[i] for i in kept), floats


def read_back(values, floats: frozenset[int]):
    """The cond's outputs with each float leaf read back as a Python (symbolic) float."""
    if not floats:
        return values
    leaves, spec = pytree.tree_flatten(values)
    leaves = [v.item() if i in floats and isinstance(v, torch.Tensor) and v.dim() == 0 else v
              for i, v in enumerate(leaves)]
    return pytree.tree_unflatten(leaves, spec)
