"""synthesize: rewrite the functions that break into graph-friendly Python.

The passes run in this order on each function's AST (one place, one list):
"""

from __future__ import annotations

import ast

from .assert_to_check import asserts_to_checks
from .branch_to_cond import branches_to_cond
from .context import RewriteContext, RewriteRefused
from .loop_to_while import loops_to_while
from .scalar_to_tensor import scalar_reads_to_tensors

PASSES = (
    ("loop_to_while", loops_to_while),  # before scalar reads: range() needs the raw stop
    ("scalar_to_tensor", scalar_reads_to_tensors),
    ("assert_to_check", asserts_to_checks),
    ("branch_to_cond", branches_to_cond),
)


def rewrite(func: ast.FunctionDef, ctx: RewriteContext) -> ast.FunctionDef:
    ctx.func = func
    for _name, run in PASSES:
        run(func, ctx)
    return func


__all__ = ["PASSES", "RewriteContext", "RewriteRefused", "rewrite"]
