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
    _mark_arm_reads(func, ctx)
    for _name, run in PASSES:
        run(func, ctx)
    return func


__all__ = ["PASSES", "RewriteContext", "RewriteRefused", "rewrite"]


def _mark_arm_reads(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    """Scalar reads and ``range(<tensor>)`` loops inside the arms of data-dependent ifs."""
    from .names import walk_local

    for node in walk_local(func.body):
        if not (isinstance(node, ast.If) and node.lineno in ctx.dependent_lines):
            continue
        for inner in walk_local(node.body + node.orelse):
            if isinstance(inner, ast.For) and _reads_scalar(inner.iter):
                ctx.arm_loop_lines.add(inner.lineno)
            elif isinstance(inner, ast.stmt) and not isinstance(inner, ast.For) \
                    and _reads_scalar(inner):
                ctx.arm_scalar_lines.add(inner.lineno)


def _reads_scalar(node: ast.AST) -> bool:
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            func = call.func
            if isinstance(func, ast.Attribute) and func.attr == "item":
                return True
            if isinstance(func, ast.Name) and func.id in ("int", "float", "bool") \
                    and len(call.args) == 1 and not isinstance(call.args[0], ast.Constant):
                return True
    return False
