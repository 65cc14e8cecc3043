"""Branch predicates in rewritten code: what ``torch.cond`` and a check take as their
condition, and the break flag a loop has before its first iteration."""

from __future__ import annotations

from typing import Any

import torch

from capture.branch_asserts import note_predicate

from .rt_symbolic import is_unbacked


class _NoBreakYet:
    """A loop's break flag before its first iteration (``break_guard``): true, and known so
    before any data, so the ``if`` it guards runs as written in every mode (no cond on a
    constant in the graph, never forced to its other side)."""

    def __bool__(self) -> bool:
        return True

    def __repr__(self) -> str:
        return "NO_BREAK_YET"


NO_BREAK_YET = _NoBreakYet()


def pred(value: Any) -> Any:
    """A branch predicate: a 0-d bool tensor, or the Python truth value."""
    if value is NO_BREAK_YET:
        return value
    if isinstance(value, torch.Tensor):
        if value.dtype == torch.bool and value.dim() == 0:
            return value  # already what torch.cond takes: no reshape/convert in the graph
        if value.numel() != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return value.reshape(()).bool()
    if is_unbacked(value):
        # a size only known at run time (``idx.shape[0] == 0`` after a nonzero): bool() would
        # guard on it; a 0-d bool tensor is a predicate torch.cond takes (and can be marked)
        truth = value if isinstance(value, torch.SymBool) else value != 0
        return note_predicate(torch.full((), truth, dtype=torch.bool), truth)
    return bool(value)
