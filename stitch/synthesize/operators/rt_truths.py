"""Truth values of collections in a branch test: ``any``/``all`` of a list (of sizes, in a
test on sizes), ``value in (a, b, ...)`` and, in a test on sizes, ``==``/``!=`` of lists of
sizes, kept as tensors (or SymBools) where Python would read a tensor's or a size's truth."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .rt_logical import SYMBOLIC, size_number, sym_truth, truth
from .rt_symbolic import is_constant
from .rt_values import as_number


def truth_of(function: Callable, items: Any, sizes: bool = False) -> Any:
    """``any(xs)`` / ``all(xs)`` in a branch test (``xs`` a list, or in a test on sizes a
    generator made into one): over one-element tensors, and in a test on sizes over numbers
    that follow a dynamic dimension, the same truth as a 0-d tensor (``bool()`` of each, as
    Python would take it); anything else, or a shadowed ``any``, the call as written."""
    import builtins

    if function is not builtins.any and function is not builtins.all:
        return function(items)
    items = list(items)
    if sizes and any(size_number(v) for v in items) and all(
            size_number(v) or isinstance(v, bool | int | float) for v in items):
        if sizes == SYMBOLIC:  # a SymBool, no tensor (``int(any(...))`` in a loop's count)
            return _sym_any_all(function is builtins.any, items)
        items = [torch.as_tensor(truth(v) if size_number(v) else bool(v)) for v in items]
    if not items or not all(isinstance(v, torch.Tensor) and v.numel() == 1 for v in items):
        return function(items)
    stacked = torch.stack([v.reshape(()).bool() for v in items])
    return as_number(stacked.any() if function is builtins.any else stacked.all())


def _sym_any_all(is_any: bool, items: list) -> Any:
    """``any``/``all`` of sizes and Python numbers as Python takes them: a Python truth
    decides where it can, the sizes' truths combine as one SymBool."""
    import functools
    import operator

    truths = [sym_truth(v) if size_number(v) else bool(v) for v in items]
    # a Python truth is a constant bool (under Dynamo a SymBool passes as a bool too)
    decided = [isinstance(t, bool) and is_constant(t) for t in truths]
    if any(d and t is is_any for d, t in zip(decided, truths, strict=True)):
        return is_any  # a Python True in ``any``, False in ``all``
    symbolic = [t for d, t in zip(decided, truths, strict=True) if not d]
    if not symbolic:  # every truth a Python one, none deciding (Dynamo: sizes it made static)
        return not is_any
    return functools.reduce(operator.or_ if is_any else operator.and_, symbolic)


def member(value: Any, options: tuple, negated: bool = False) -> Any:
    """``value in (a, b, ...)`` (``not in`` with ``negated``) in a branch test, a tuple of
    numbers: for a one-element tensor, ``value == a or value == b ...`` as a 0-d tensor
    (what Python's ``in`` computes, element by element); anything else as written."""
    if not (isinstance(value, torch.Tensor) and value.numel() == 1 and options
            and all(type(o) in (bool, int, float) for o in options)):
        return (value not in options) if negated else (value in options)
    found = torch.stack([(value.reshape(()) == o) for o in options]).any()
    return as_number(torch.logical_not(found) if negated else found)


def items_equal(left: Any, right: Any, negated: bool = False) -> Any:
    """``left == right`` (``!=`` with ``negated``) in a test on sizes: two lists, or two
    tuples (``torch.Size`` among them), of one length compare item by item, as Python does,
    each pair of sizes as a SymBool where Python would decide it by a guard (``self.shapes
    != [[h, w], ...]``: a cache keyed by the input's shape); anything else as written."""
    if not _sequences(left, right):
        return (left != right) if negated else (left == right)  # as written
    same = _equal(left, right)
    if not negated:
        return same
    # under Dynamo a SymBool passes for a bool, and ``not`` would decide it by a guard;
    # Dynamo itself says which it is (rt_symbolic.py)
    return (not same) if is_constant(same) else torch.sym_not(same)


def _sequences(left: Any, right: Any) -> bool:
    """Two lists, or two tuples (a ``torch.Size`` is one): what Python compares by item."""
    return (isinstance(left, list) and isinstance(right, list)
            or isinstance(left, tuple) and isinstance(right, tuple))


def _equal(left: Any, right: Any) -> Any:
    if not _sequences(left, right):
        return left == right
    if len(left) != len(right):
        return False
    same: Any = True
    for a, b in zip(left, right, strict=True):
        pair = _equal(a, b)
        if not isinstance(pair, (bool, torch.SymBool)):  # noqa: UP038 - Dynamo traces a tuple
            return left == right  # items Python compares otherwise (tensors): as written
        same = same & pair  # plain bools stay a bool; a size's truth makes one SymBool
    return same
