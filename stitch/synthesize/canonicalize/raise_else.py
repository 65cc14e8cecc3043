"""An ``else`` after an arm that raises becomes the statements after the ``if``::

    if torch.isnan(x).any():                    if torch.isnan(x).any():
        raise ValueError("NaN in input")            raise ValueError("NaN in input")
    elif (x.abs() > 100).any():          ->     if (x.abs() > 100).any():
        raise ValueError("out of range")            raise ValueError("out of range")

Exact in Python: where the test holds, the arm raises and nothing after the ``if`` runs;
where it does not, the ``else`` runs and then what follows, as before. Each test is then an
``if ...: raise`` of its own, which ``assert_to_check`` makes a check, whatever the chain's
length; before, the chain was one branch whose arms only raise, which no rewrite took. Only
an arm that raises on every path (its last statement a ``raise``, or an ``if`` whose every
side ends so), on the lines of data-dependent tests.
"""

from __future__ import annotations

import ast

from ..analysis.context import RewriteContext
from ..analysis.names import statement_blocks


def raises_then_rest(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    lines = ctx.dependent_lines | set(ctx.sites)
    for block in list(statement_blocks(func.body)):
        i = 0
        while i < len(block):
            stmt = block[i]
            if isinstance(stmt, ast.If) and stmt.lineno in lines and stmt.orelse \
                    and _raises(stmt.body):
                block[i + 1:i + 1] = stmt.orelse  # the else's statements, in the same block
                stmt.orelse = []
            i += 1


def _raises(stmts: list[ast.stmt]) -> bool:
    """The block raises on every path."""
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, ast.Raise):
        return True
    return isinstance(last, ast.If) and _raises(last.body) and _raises(last.orelse)
