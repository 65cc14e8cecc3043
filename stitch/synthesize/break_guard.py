"""``if <data-dependent>: break`` in a loop over a fixed sequence (early exit over layers,
stop once a score is reached) becomes a flag and ``if``s that ``branch_to_cond`` turns into
``torch.cond``::

    for layer in self.layers:                  __stitch_go_1 = __stitch_rt__.go()
        h = layer(h)                           for layer in self.layers:
        if h.abs().mean() < tol:        ->         if __stitch_go_1:
            break                                      h = layer(h)
        h = self.norm(h)                               if h.abs().mean() < tol:
                                                           __stitch_go_1 = __stitch_rt__.stop()
                                                       else:
                                                           h = self.norm(h)

Exact: an iteration runs while no earlier one broke; the statements before the ``if`` run,
then either what the ``if`` holds before its ``break`` or the rest of the body. The flag is
a 0-d bool tensor: once set from data, every later iteration's ``if`` is a cond (with the
flag ``True`` it runs as written). The loop itself stays a Python loop: only loops over a
fixed sequence (a ``ModuleList``, ``range`` of a constant) — a loop counted by data is
``loop_to_while``'s and keeps its refusal of ``break``. Only a ``break`` that ends the body
of an ``if`` on a data-dependent line at the top level of the loop body, no ``else`` on
either, and no other ``break``/``continue``/``return`` in the loop.
"""

from __future__ import annotations

import ast

from .context import RewriteContext
from .names import contains, name, rt_call, statement_blocks


def breaks_to_flags(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    from .loop_to_while import loop_lines

    data_loops = loop_lines(ctx)
    for block in list(statement_blocks(func.body)):
        i = 0
        while i < len(block):
            node = block[i]
            at = (_breaking_if(node, ctx) if isinstance(node, ast.For)
                  and node.lineno not in data_loops else None)
            if at is not None:
                n = ctx.next_id()
                flag = f"__stitch_go_{n}"
                start = ast.copy_location(ast.Assign([name(flag, True)], rt_call("go")), node)
                _rewrite(node, at, flag, ctx)
                block[i:i + 1] = [start, node]
                i += 1
            i += 1


def _breaking_if(loop: ast.For, ctx: RewriteContext) -> int | None:
    """The index, in ``loop.body``, of the one ``if <dependent>: ...; break`` to rewrite."""
    if loop.orelse:
        return None
    found = [i for i, s in enumerate(loop.body)
             if isinstance(s, ast.If) and s.lineno in ctx.dependent_lines and not s.orelse
             and s.body and isinstance(s.body[-1], ast.Break)]
    if len(found) != 1:
        return None
    i = found[0]
    rest = loop.body[:i] + loop.body[i].body[:-1] + loop.body[i + 1:]
    if contains(rest, ast.Break, ast.Continue, ast.Return, ast.Yield, ast.YieldFrom):
        return None
    return i


def _rewrite(loop: ast.For, i: int, flag: str, ctx: RewriteContext) -> None:
    stop = loop.body[i]
    stop.body[-1] = ast.copy_location(ast.Assign([name(flag, True)], rt_call("stop")),
                                      stop.body[-1])
    rest = loop.body[i + 1:]
    if rest:
        stop.orelse = rest
        stop.end_lineno = rest[-1].end_lineno
    guard = ast.If(test=name(flag), body=loop.body[:i + 1], orelse=[])
    ast.copy_location(guard, loop)
    guard.lineno = loop.lineno  # the loop's line: a data-dependent if for branch_to_cond
    guard.end_lineno = loop.end_lineno
    ctx.dependent_lines.add(loop.lineno)
    loop.body = [guard]
