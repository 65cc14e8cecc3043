"""Keywords of a rewritten branch's ``cond`` call that tell the runtime what its arms hold
(``operators/rt_control.py``)."""

from __future__ import annotations

import ast

from ..analysis.names import is_rt_call
from ..analysis.none_values import may_give_none


def with_reads(call: ast.Call, reads: list[str]) -> None:
    """``reads=N``: the last N operands are names the arms only read."""
    if reads:
        call.keywords.append(ast.keyword("reads", ast.Constant(len(reads))))


def mark_nesting(call: ast.Call, arms: list[ast.stmt]) -> None:
    """``nests=True`` on a cond whose arms hold another (already rewritten, inner first):
    there an arm may give an int that is symbolic when traced (the inner cond's output)
    where the other gives a constant, so every number must travel as a tensor."""
    if any(is_rt_call(c, "cond", "cond_effects") for a in arms for c in ast.walk(a)):
        call.keywords.append(ast.keyword("nests", ast.Constant(True)))


def mark_structures(call: ast.Call, node: ast.If, outputs: bool = False) -> None:
    """``optional=True`` where an arm may give None, so the arms' output structures may
    differ (``rt_union.py``); ``outputs=True`` where what the arms return is what the
    program returns (they end the function, which is the one torch.compile entered or
    returns to it through every caller's rest: ``caller_frames.returns_to_entry``), the
    one place such a value can be carried."""
    if may_give_none(node.body + node.orelse):
        call.keywords.append(ast.keyword("optional", ast.Constant(True)))
    if outputs:
        call.keywords.append(ast.keyword("outputs", ast.Constant(True)))
