"""A conditional expression that is a whole assignment becomes an ``if`` statement::

    extra = h.mean(0) if h.mean() > 0.3 else None   ->   if h.mean() > 0.3:
                                                              extra = h.mean(0)
                                                          else:
                                                              extra = None

Exact in Python: the test is evaluated first, then one side, then the store. As a statement
the branch meets everything an ``if`` does: the arms' effects, a continuation where one
side is ``None`` and the rest reads it (``continuation.py``), a select where both sides are
cheap and pure. Only ``name = a if t else b`` (one plain name stored; a nested conditional
expression in a side stays an expression, rewritten where it is) on a line with a branch;
any other conditional expression stays one (``ifexp_to_cond.py``).
"""

from __future__ import annotations

import ast

from ..analysis.context import RewriteContext
from ..analysis.names import statement_blocks
from ..analysis.origins import tests_as


def ifexps_to_statements(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    lines = {ln for ln, s in ctx.sites.items() if s.kind.value == "branch"} | ctx.dependent_lines
    for block in list(statement_blocks(func.body)):
        for i, stmt in enumerate(block):
            if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name)
                    and isinstance(stmt.value, ast.IfExp) and stmt.lineno in lines
                    and stmt.value.lineno == stmt.lineno):
                block[i] = _as_if(stmt)


def _as_if(stmt: ast.Assign) -> ast.If:
    target, value = stmt.targets[0], stmt.value

    def side(expr: ast.expr) -> ast.Assign:
        made = ast.Assign([ast.Name(target.id, ast.Store())], expr)
        return ast.copy_location(made, stmt)

    made = ast.copy_location(ast.If(value.test, [side(value.body)], [side(value.orelse)]), stmt)
    tests_as(made, value)  # verification forces the model's expression for this if
    return made
