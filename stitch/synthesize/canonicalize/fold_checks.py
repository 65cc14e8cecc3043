"""A data-dependent branch holding only checks folds into the checks, with no cond::

    if p:                           __stitch_rt__.check("S2", not p or ok, "...")
        assert ok, "..."      ->
"""

from __future__ import annotations

import ast
import copy

from ...plan import Action
from ..analysis.names import is_rt_call, located, name, rt_call, thunk
from ..analysis.truth import boolean
from .arm_checks import gate


def _is_check(s: ast.stmt) -> bool:
    return isinstance(s, ast.Expr) and is_rt_call(s.value, "check")


def _is_pred(s: ast.stmt) -> bool:
    """``__stitch_pred_<n> = ...``: the predicate of a branch nested here that was folded
    into checks (pure: only the checks read it)."""
    return (isinstance(s, ast.Assign) and len(s.targets) == 1
            and isinstance(s.targets[0], ast.Name)
            and s.targets[0].id.startswith("__stitch_pred_"))


def only_checks(block: list[ast.stmt]) -> bool:
    """Only runtime checks (asserts ``assert_to_check`` rewrote) in this block, also inside
    a nested branch already folded into checks or a Python-level ``if`` holding only
    checks."""
    return all(_is_check(s) or _is_pred(s)
               or (isinstance(s, ast.If) and only_checks(s.body) and only_checks(s.orelse))
               for s in block)


def _unless(skip: ast.expr, ok: ast.expr) -> ast.expr:
    """``skip or ok``, each operand a thunk (Python values keep their short-circuit)."""
    return rt_call("logical_or", thunk(skip), thunk(ok))


def fold_checks(node: ast.If, pred: ast.stmt, pred_name: str, ctx) -> list[ast.stmt]:
    """``if p: assert ok`` -> ``assert (not p) or ok`` (``else`` arms: ``p or ok``): a check
    whose condition holds wherever the branch is not taken. No cond is needed; ``ok`` is
    evaluated either way (tensor ops, as the check itself). A nested branch folded before
    brings its predicate along, evaluated either way too; a Python-level ``if`` inside
    folds its test in as a thunk, evaluated only after the conditions around it hold, as
    in the model (for Python values)."""
    def fold(block, wrap) -> list[ast.stmt]:
        out = []
        for stmt in block:
            if _is_pred(stmt):
                out.append(stmt)
            elif isinstance(stmt, ast.If):
                test = boolean(stmt.test)
                out += fold(stmt.body, lambda ok, t=test, w=wrap: w(_unless(
                    rt_call("logical_not", copy.deepcopy(t)), ok)))
                out += fold(stmt.orelse, lambda ok, t=test, w=wrap: w(_unless(
                    copy.deepcopy(t), ok)))
            else:
                call = copy.deepcopy(stmt.value)
                call.args[1] = wrap(call.args[1])
                out.append(ast.copy_location(ast.Expr(call), stmt))
        return out

    n = pred_name.rpartition("_")[2]
    out = [pred]  # each side's checks are computed on every input: gated on their side
    out += gate(fold(node.body, lambda ok: _unless(rt_call("logical_not", name(pred_name)),
                                                   ok)), "", pred_name, True, n, folded=True)
    out += gate(fold(node.orelse, lambda ok: _unless(name(pred_name), ok)), "", pred_name,
                False, n, folded=True)
    ctx.decide(Action.CHECK, node, "a branch holding only checks: folded into the checks "
               "(`not p or ok`), no cond needed")
    return [located(s, node) for s in out]
