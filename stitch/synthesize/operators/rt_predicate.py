"""Branch predicates in rewritten code: what ``torch.cond`` and a check take as their
condition, and the break flag a loop has before its first iteration."""

from __future__ import annotations

from typing import Any

import sympy
import torch

from capture.branch_truths import note_predicate
from capture.size_tests import holds_at_most_sizes, traced_values

from .rt_symbolic import is_unbacked, number_kind, number_truth


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
        truth = number_truth(value)
        return note_predicate(torch.full((), truth, dtype=torch.bool), truth)
    return bool(value)


def size_pred(value: Any) -> Any:
    """The predicate of a test on an input's size that torch.export would decide for the
    examples (``if x.shape[0] > 4:``, size_tests.py): a number with a hint while tracing (a
    dynamic dimension) becomes a 0-d bool tensor, so torch.cond keeps both sides in the
    graph instead of a guard on the size; a Python value runs as written."""
    if isinstance(value, torch.Tensor) or value is NO_BREAK_YET:
        return pred(value)
    if isinstance(value, int | torch.SymInt | float | torch.SymFloat) \
            and not isinstance(value, bool) and number_kind(value) == "symbolic":
        value = value != 0  # truthiness of a size (``if pad:``), as Python takes it
    if isinstance(value, bool | torch.SymBool) and number_kind(value) == "symbolic":
        if isinstance(value, torch.SymBool):  # decided by the dimension's range: no guard
            from torch.fx.experimental.symbolic_shapes import (
                statically_known_false,
                statically_known_true,
            )

            if statically_known_true(value) or statically_known_false(value):
                return statically_known_true(value)
        return note_predicate(torch.full((), value, dtype=torch.bool), value)
    return pred(value)


def general_side(value: Any) -> Any:
    """The truth of a test on an input's size whose general arm is tried at every size
    (convert/one_arm.py): while torch.export traces, where the traced sizes take the side
    fewer sizes take (``padding_len > 0`` false, ``H == window`` true: each size in the test
    set from 2 to 64, or twice its traced value, the others at theirs), the other side,
    read with no guard; where they take the side most sizes take, the test as written
    (torch.export guards on it, as without the rewrite): the program never leaves the
    model's own arm where the examples do not show the other arm serving. Anything else is
    Python's truth as written (eager runs, Dynamo's census, a Python value)."""
    if torch.compiler.is_dynamo_compiling():
        return value
    if isinstance(value, int | torch.SymInt | float | torch.SymFloat) \
            and not isinstance(value, bool) and number_kind(value) == "symbolic":
        value = value != 0  # truthiness of a size (``if pad:``), as Python takes it
    if isinstance(value, torch.SymBool) and number_kind(value) == "symbolic":
        from torch.fx.experimental.symbolic_shapes import (
            statically_known_false,
            statically_known_true,
        )

        if statically_known_true(value) or statically_known_false(value):
            return statically_known_true(value)
        node = value.node
        values = traced_values(node.shape_env)
        most = holds_at_most_sizes(node.expr, values)
        traced = node.expr.xreplace({s: sympy.Integer(int(v)) for s, v in values.items()
                                     if s in node.expr.free_symbols})
        if most is not None and traced in (sympy.true, sympy.false) \
                and (traced is sympy.true) != most:
            return most
    return value
