"""``if <data-dependent>: continue`` in a loop body becomes an ``if`` over the rest of the
body, which ``branch_to_cond`` can turn into a ``torch.cond``::

    for e in range(n):                          for e in range(n):
        idx = torch.where(mask[e])[0]               idx = torch.where(mask[e])[0]
        if idx.shape[0] == 0:          ->           if idx.shape[0] == 0:
            continue                                    pass
        out.index_add_(0, idx, f(x[idx]))           else:
                                                        out.index_add_(0, idx, f(x[idx]))

Exact: the rest of the body runs exactly when the condition is false, as before; what the
``if`` does before its ``continue`` (``h = h * 2; continue``) stays its body. Only an ``if``
whose body ends in ``continue`` with no other jump in it (no ``else``), on a data-dependent
line, at the top level of the loop body (DBRX's expert loop in transformers 4.52).
"""

from __future__ import annotations

import ast

from ..analysis.context import RewriteContext
from ..analysis.names import SCOPES, contains, walk_local


def continues_to_else(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    for node in walk_local(func.body):
        if isinstance(node, SCOPES) or not isinstance(node, ast.For | ast.While):
            continue
        node.body = _rewrite_body(node.body, ctx)


def continues_as_else(body: list[ast.stmt]) -> list[ast.stmt]:
    """Every ``if <test>: continue`` at the top level of ``body`` as an ``if`` over the rest
    (any test: the restructuring is exact whatever it is). For a loop another rewrite turns
    into something that cannot ``continue`` (a loop over ``nonzero()``: its body becomes a
    cond arm)."""
    return _rewrite_body(body, None)


def _rewrite_body(body: list[ast.stmt], ctx: RewriteContext | None) -> list[ast.stmt]:
    for i, stmt in enumerate(body):
        if (isinstance(stmt, ast.If) and (ctx is None or stmt.lineno in ctx.dependent_lines)
                and not stmt.orelse and isinstance(stmt.body[-1], ast.Continue)
                and not contains(stmt.body[:-1], ast.Continue, ast.Break, ast.Return)):
            rest = _rewrite_body(body[i + 1:], ctx)
            if not rest:
                break
            # what the if does before its ``continue`` stays its body
            stmt.body = stmt.body[:-1] or [ast.copy_location(ast.Pass(), stmt.body[0])]
            stmt.orelse = rest
            stmt.end_lineno = rest[-1].end_lineno  # the if now spans the rest (liveness reads it)
            return body[:i + 1]
    return body
