"""``while True:`` left by one ``if <test>: break`` becomes a loop on the test::

    while True:                         x = x * 0.5
        x = x * 0.5                     i += 1
        i += 1                    ->    while not (x.norm() < 1.0 or i >= 6):
        if x.norm() < 1.0 or i >= 6:        x = x * 0.5
            break                           i += 1

In general ``while True: A; if P: break; B`` is ``A`` then ``while not P: B; A``: exact in
Python, ``A`` runs once more than ``B`` and the test is made where it was. The loop then
is one the loop rewrites take (``torch.while_loop`` on a data test, a counter carried as a
0-d tensor); a ``break`` in the middle of a loop is none of theirs. Only where the ``break``
is the loop's only way out at its own level (no other ``break``, no ``continue``, no
``else``, no ``return`` in ``A``), on the line of a data-dependent loop.
"""

from __future__ import annotations

import ast
import copy

from ..analysis.context import RewriteContext
from ..analysis.names import SCOPES, statement_blocks


def while_true_to_test(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    lines = ctx.dependent_lines | set(ctx.sites)
    for block in list(statement_blocks(func.body)):
        i = 0
        while i < len(block):
            stmt = block[i]
            made = _as_loop(stmt, lines) if isinstance(stmt, ast.While) else None
            if made is not None:
                block[i:i + 1] = made
                ctx.arm_loop_lines.add(made[-1].lineno)  # a loop the loop rewrites take
                i += len(made) - 1
            i += 1


def _as_loop(loop: ast.While, lines: set[int]) -> list[ast.stmt] | None:
    if not (isinstance(loop.test, ast.Constant) and loop.test.value is True
            or isinstance(loop.test, ast.Constant) and loop.test.value == 1) or loop.orelse:
        return None
    exits = [k for k, s in enumerate(loop.body) if _breaks(s)]
    if len(exits) != 1:
        return None
    k = exits[0]
    if loop.lineno not in lines and loop.body[k].lineno not in lines:
        return None  # the census saw no break at the loop or its exit
    before, after = loop.body[:k], loop.body[k + 1:]
    if any(_exits_loop(s) for s in before + after):
        return None
    test = loop.body[k].test
    again = ast.copy_location(ast.While(
        ast.copy_location(ast.UnaryOp(ast.Not(), test), test),
        after + [copy.deepcopy(s) for s in before] or [ast.Pass()], []), loop.body[k])
    return [*before, again]


def _breaks(stmt: ast.stmt) -> bool:
    """``if <test>: break`` with nothing else in it."""
    return (isinstance(stmt, ast.If) and not stmt.orelse and len(stmt.body) == 1
            and isinstance(stmt.body[0], ast.Break))


def _exits_loop(stmt: ast.stmt) -> bool:
    """A ``break`` or ``continue`` of the loop ``stmt`` is in (not of a loop inside it: a
    nested loop's own body is left out, its ``else`` is not)."""
    stack: list[ast.AST] = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Break | ast.Continue):
            return True
        if isinstance(node, SCOPES):
            continue
        if isinstance(node, ast.For | ast.While | ast.AsyncFor):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))
    return False
