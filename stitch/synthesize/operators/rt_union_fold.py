"""Nested ``Alternatives`` folded (``flatten``): a loop wraps the last iteration's value
in each iteration's, so the values of one structure are merged by ``torch.where`` on the
conditions that select them (``rt_split`` traces the rest of a function once per
structure, not once per iteration)."""

from __future__ import annotations

from typing import Any

import torch
import torch.utils._pytree as pytree

from .rt_union import Alternatives, meta_of


def rebuild(out: tuple, positions: tuple[int, ...]) -> tuple:
    """The cond's outputs with each (flag, true side, false side) made ``Alternatives``;
    folded (``flatten``) at the graph's level. Inside an arm Dynamo traces they stay as
    they are, as the enclosing arm's probe saw them (Dynamo cannot decide the shapes'
    equality ``flatten`` asks; what an iteration nests there is folded once the enclosing
    cond is done)."""
    fold = flatten if not torch.compiler.is_dynamo_compiling() else (lambda v: v)
    return tuple(fold(Alternatives(*v)) if i in positions else v for i, v in enumerate(out))


def flatten(value: Alternatives) -> Any:
    """``value`` with nested ``Alternatives`` folded (a loop wraps the last iteration's
    value in each iteration's, and each side's placeholders copy the other's structure: a
    size that would double per iteration): the values of each structure merged
    (``torch.where`` on the conditions that select them), one value where one structure is
    left, ``Alternatives`` of two where two are; ``value`` unchanged where more are left or
    the values of one structure differ in shape."""
    groups: dict[Any, list[tuple[Any, Any]]] = {}
    for condition, leaf in _cases(value, None):
        groups.setdefault(meta_of(leaf), []).append((condition, leaf))
    if len(groups) > 2:
        return value
    merged = []
    for cases in groups.values():
        one = _merged(cases)
        if one is None:
            return value
        merged.append(one)
    if len(merged) == 1:
        return merged[0][1]
    (when, first), (_, second) = merged
    return Alternatives(when, first, second)


def _cases(value: Any, condition: Any):
    """(where it holds, value) for each leaf value of nested ``Alternatives``; ``condition``
    None: everywhere."""
    if not isinstance(value, Alternatives):
        yield condition, value
        return
    flag = value.flag if value.flag.dtype == torch.bool else value.flag.bool()
    for side, when in ((value.when_true, flag), (value.when_false, torch.logical_not(flag))):
        yield from _cases(side, when if condition is None
                          else torch.logical_and(condition, when))


def _merged(cases: list[tuple[Any, Any]]) -> tuple[Any, Any] | None:
    """(where any of ``cases`` holds, their values merged by ``torch.where``); None where
    their tensors differ in shape (a placeholder's is not known)."""
    from torch.fx.experimental.symbolic_shapes import statically_known_true, sym_eq

    condition, value = cases[-1]
    for when, other in reversed(cases[:-1]):
        leaves, spec = pytree.tree_flatten(other)
        into = pytree.tree_leaves(value)
        out = []
        for a, b in zip(leaves, into, strict=True):
            if not isinstance(a, torch.Tensor):
                out.append(a)
                continue
            if not statically_known_true(sym_eq(tuple(a.shape), tuple(b.shape))):
                return None
            out.append(torch.where(when, a, b))
        value = pytree.tree_unflatten(out, spec)
        condition = None if condition is None or when is None else \
            torch.logical_or(when, condition)
    return condition, value
