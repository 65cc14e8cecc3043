"""A ``raise`` that its own ``try`` catches becomes the handler, run in place, and the rest
of the ``try`` body the ``else`` of the ``if`` that raised::

    try:                                          print(...)
        print(...)                                if (h > 2.0).any():
        if (h > 2.0).any():                           h = h - 1.0
            raise ValueError("too large")  ->     else:
        h = h * 2.0                                   h = h * 2.0
    except ValueError:
        h = h - 1.0

Exception handling is control flow a graph cannot hold; once the ``raise`` is the handler's
statements, the ``if`` on data is a branch like any other (``branch_to_cond`` makes it a
cond; a test on Python values stays Python). Exact in Python for the raises the ``try``
holds: a handler runs after the statements before the ``raise`` and nothing after it runs;
the try's ``else:`` runs when nothing raised, ``finally:`` after either. What the rewrite
drops is the handler for exceptions raised *by calls* in the body: those propagate from the
program, as they do from any ``torch.export`` program (tracing runs the body and never the
handler). The handler is looked up by the raised class and the handler's types, resolved
in the function's globals and builtins, first match wins as in Python.

Only a ``try`` stitch has to change (its body holds a break site, or it lies in an arm of a
data-dependent ``if``, which a cond cannot hold with a ``try`` in it), whose raises are
reached through ``if``s only (not in a loop, a ``with`` or a nested ``try``), every handler
matching some raise, no ``except ... as e`` whose name the handler reads, no bare ``raise``
in a handler, no ``finally`` beside a ``return``/``break``/``continue``. Anything else is
left as written.
"""

from __future__ import annotations

import ast
import builtins
import copy

from ...plan import Action
from ..analysis.context import RewriteContext
from ..analysis.names import contains, statement_blocks, walk_local


def raises_to_handlers(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    in_arms = {id(n) for node in walk_local(func.body)
               if isinstance(node, ast.If) and node.lineno in ctx.dependent_lines
               for n in walk_local(node.body + node.orelse) if isinstance(n, ast.Try)}
    for block in list(statement_blocks(func.body)):
        i = 0
        while i < len(block):
            node = block[i]
            new = (_convert(node, ctx, id(node) in in_arms) if isinstance(node, ast.Try)
                   else None)
            if new is not None:
                block[i:i + 1] = new
                i += len(new)
            else:
                i += 1


def _convert(node: ast.Try, ctx: RewriteContext, in_arm: bool) -> list[ast.stmt] | None:
    lines = {n.lineno for n in walk_local(node.body) if isinstance(n, ast.stmt)}
    needed = in_arm or lines & (set(ctx.sites) | ctx.dependent_lines)
    if not needed or not node.handlers:
        return None
    handlers = [_handler_types(h, ctx) for h in node.handlers]
    if any(types is None for types in handlers) or not _handlers_usable(node):
        return None
    used: set[int] = set()

    def handler_for(stmt: ast.Raise) -> list[ast.stmt] | None:
        raised = _raised_class(stmt, ctx)
        if raised is None:
            return None
        for k, types in enumerate(handlers):
            if any(issubclass(raised, t) for t in types):
                used.add(k)
                return copy.deepcopy(node.handlers[k].body)
        return None

    body = _block(node.body, node.orelse, handler_for)
    if body is None or not used:
        return None
    if node.finalbody and contains(body, ast.Return, ast.Break, ast.Continue):
        return None  # ``finally`` runs before leaving: not a plain statement after
    ctx.decide(Action.COND, node, "try/except: each raise the try catches runs its handler "
               "in place; the rest of the try body is the else of the if that raised")
    return [*body, *node.finalbody] or [ast.copy_location(ast.Pass(), node)]


def _block(stmts: list[ast.stmt], rest: list[ast.stmt], handler_for) -> list[ast.stmt] | None:
    """``stmts`` then ``rest`` with each caught raise as its handler, the statements after it
    dropped; ``None`` where a raise is reached other than through ifs or nothing catches it."""
    out: list[ast.stmt] = []
    for i, stmt in enumerate(stmts):
        if not contains([stmt], ast.Raise):
            out.append(stmt)
            continue
        if isinstance(stmt, ast.Raise):
            handler = handler_for(stmt)
            return None if handler is None else out + handler
        if not isinstance(stmt, ast.If):
            return None  # a raise inside a loop, a with, a nested try: left
        after = stmts[i + 1:] + rest
        body, orelse = _block(stmt.body, after, handler_for), _block(stmt.orelse, after,
                                                                     handler_for)
        if body is None or orelse is None:
            return None
        stmt.body = body or [ast.copy_location(ast.Pass(), stmt)]
        stmt.orelse = orelse
        return out + [stmt]
    return out + copy.deepcopy(rest)


def _handlers_usable(node: ast.Try) -> bool:
    for h in node.handlers:
        if contains(h.body, ast.Raise) and any(isinstance(n, ast.Raise) and n.exc is None
                                               for n in walk_local(h.body)):
            return False  # a bare re-raise needs the exception being handled
        if h.name and any(isinstance(n, ast.Name) and n.id == h.name
                          for n in walk_local(h.body)):
            return False  # the handler reads the exception object
    return True


def _resolve(expr: ast.expr, ctx: RewriteContext):
    """The object a ``Name`` or dotted ``Attribute`` chain names in the function's globals or
    builtins; ``None`` when it names anything else."""
    if isinstance(expr, ast.Name):
        scope = ctx.module_globals or {}
        if expr.id in ctx.freevars:
            return None  # a closure's name: not what the globals hold
        return scope[expr.id] if expr.id in scope else getattr(builtins, expr.id, None)
    if isinstance(expr, ast.Attribute):
        base = _resolve(expr.value, ctx)
        return getattr(base, expr.attr, None) if base is not None else None
    return None


def _exception_class(expr: ast.expr, ctx: RewriteContext) -> type | None:
    found = _resolve(expr, ctx)
    return found if isinstance(found, type) and issubclass(found, BaseException) else None


def _handler_types(handler: ast.ExceptHandler, ctx: RewriteContext) -> tuple | None:
    if handler.type is None:
        return (BaseException,)
    parts = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    types = tuple(_exception_class(p, ctx) for p in parts)
    return None if any(t is None for t in types) else types


def _raised_class(node: ast.Raise, ctx: RewriteContext) -> type | None:
    if node.exc is None or node.cause is not None:
        return None
    target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    return _exception_class(target, ctx)
