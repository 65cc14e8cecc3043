"""A ``return`` inside a loop over a fixed sequence becomes a ``break`` and a return after
the loop on its flag (early-exit models: leave the layer stack once a head is confident)::

    for i, layer in enumerate(self.layers):       for i, layer in enumerate(self.layers):
        x = layer(x)                                  x = layer(x)
        logits = self.head(x)              ->         logits = self.head(x)
        if logits.max() > 0.9:                        if logits.max() > 0.9:
            return logits, i                              break
    return logits, len(self.layers)               if not __stitch_go_1:
                                                      return logits, i
                                                  return logits, len(self.layers)

``__stitch_go_1`` is the flag ``break_guard`` makes of that ``break`` ("no iteration broke
yet"), and the loop variable it restores after the loop is the one the model returned at.
Exact in Python: nothing runs between the ``break`` and the ``if`` after the loop (a loop
with an ``else`` is left), so the returned expression reads the values it read at the
``return``, evaluated in the same order. The ``if`` after the loop is an early return whose
continuation is the rest of the function (``continuation.py``), a site of its own
(``<test>.ret``); the test that returned keeps its place in the model, so verification
forces it there. Only where ``break_guard`` takes the loop: one ``if <data>: ...; return``
at the top level of a ``for`` body not counted by data, no other jump in the loop;
anything else is left as written.
"""

from __future__ import annotations

import ast

from ..analysis.context import RewriteContext
from ..analysis.names import name, statement_blocks
from .break_guard import leaving_if


def returns_to_breaks(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    data_loops = ctx.loop_lines()
    for block in list(statement_blocks(func.body)):
        i = 0
        while i < len(block):
            loop = block[i]
            at = (leaving_if(loop, ctx, ast.Return) if isinstance(loop, ast.For)
                  and loop.lineno not in data_loops else None)
            if at is not None:
                block[i:i + 1] = _rewrite(loop, at, ctx)
                i += 1
            i += 1


def _rewrite(loop: ast.For, at: int, ctx: RewriteContext) -> list[ast.stmt]:
    test = loop.body[at]
    ret = test.body[-1]
    flag = f"__stitch_go_{ctx.next_id()}"
    loop._stitch_go_flag = flag  # break_guard names its flag so (and defines it)
    test.body[-1] = ast.copy_location(ast.Break(), ret)
    after = ast.copy_location(ast.If(ast.UnaryOp(ast.Not(), name(flag)), [ret], []), ret)
    after.lineno = after.end_lineno = ret.lineno
    after._stitch_label = ctx.label(test) + ".ret"
    ctx.dependent_lines.add(ret.lineno)
    return [loop, after]
