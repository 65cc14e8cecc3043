"""A list a loop over a tensor's rows grows by one item per row, stacked after the loop, is
the loop's output, not state it carries::

    outs = []                                  outs = []
    for row in x:                              def __stitch_body_1(row):
        if row.sum() > 0:                          if row.sum() > 0:
            outs.append(row * 2)        ->              __stitch_item_1_0 = row * 2
        else:                                      else:
            outs.append(-row)                          __stitch_item_1_0 = -row
    y = torch.stack(outs)                          return (__stitch_item_1_0,)
                                               (outs,) = __stitch_rt__.while_over("S1", x,
                                                   __stitch_body_1, (), stacked=1)
                                               y = __stitch_rt__.stacked(outs, 0)

``while_over`` appends each iteration's item in eager (the list as written); traced over a
length known only at run time it is torch's ``map`` over the rows, whose outputs come back
stacked, and ``stacked`` takes them as ``torch.stack`` would have (``movedim`` to the dim).

Applies to a list the function binds once, to ``[]`` before the loop, that the body only
appends to, exactly once on every path through it (``if``/``else`` arms count as paths; an
append inside a nested loop, ``try`` or ``with`` does not qualify), and that after the loop
is only the first argument of ``torch.stack`` with a constant ``dim``. Everything else keeps
its appends, which the loop rewrites refuse as effects, as before.
"""

from __future__ import annotations

import ast

from ..analysis.names import name, rt_call, walk_local
from ..canonicalize.container_writes import fresh_containers


def stacked_lists(node: ast.For, func: ast.FunctionDef) -> dict[str, ast.Call]:
    """The lists ``node`` stacks: name -> its one ``torch.stack`` call after the loop."""
    kinds = fresh_containers(func)
    found = {}
    for n, kind in kinds.items():
        if kind != "list" or _appends_on_every_path(node.body, n) != 1:
            continue
        stack = _only_stacked_after(n, node, func)
        if stack is not None and _bound_once_before(n, node, func):
            found[n] = stack
    return found


def rewrite_appends(body: list[ast.stmt], lists: dict[str, str]) -> None:
    """``l.append(v)`` -> ``<item name> = v`` (``lists``: list -> its item's name)."""
    for i, stmt in enumerate(body):
        target = _appended(stmt)
        if target is not None and target in lists:
            body[i] = ast.copy_location(
                ast.Assign([name(lists[target], True)], stmt.value.args[0]), stmt)
        elif isinstance(stmt, ast.If):
            rewrite_appends(stmt.body, lists)
            rewrite_appends(stmt.orelse, lists)


def rewrite_stacks(stacks: dict[str, ast.Call]) -> None:
    """Each list's ``torch.stack(l, d)`` -> ``__stitch_rt__.stacked(l, d)``, in place."""
    for call in stacks.values():
        dim = call.args[1] if len(call.args) > 1 else next(
            (k.value for k in call.keywords if k.arg == "dim"), ast.Constant(0))
        replacement = rt_call("stacked", call.args[0], dim)
        call.func, call.args, call.keywords = replacement.func, replacement.args, []


def _appended(stmt: ast.stmt) -> str | None:
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        call = stmt.value
        if isinstance(call.func, ast.Attribute) and call.func.attr == "append" \
                and isinstance(call.func.value, ast.Name) and len(call.args) == 1 \
                and not call.keywords and not isinstance(call.args[0], ast.Starred):
            return call.func.value.id
    return None


def _appends_on_every_path(stmts: list[ast.stmt], n: str) -> int | None:
    """How many times every path through ``stmts`` appends to ``n`` (None: paths differ,
    or ``n`` is used otherwise, or a path leaves the block early)."""
    count = 0
    for stmt in stmts:
        if _appended(stmt) == n:
            count += 1
            continue
        if isinstance(stmt, ast.If):
            arms = {_appends_on_every_path(stmt.body, n), _appends_on_every_path(stmt.orelse, n)}
            if len(arms) != 1 or None in arms:
                return None
            count += arms.pop()
            if _mentions(stmt.test, n):
                return None
            continue
        if isinstance(stmt, ast.Return | ast.Break | ast.Continue | ast.Raise) or _mentions(stmt, n):
            return None
    return count


def _mentions(node: ast.AST, n: str) -> bool:
    return any(isinstance(x, ast.Name) and x.id == n for x in ast.walk(node))


def _only_stacked_after(n: str, loop: ast.For, func: ast.FunctionDef) -> ast.Call | None:
    """The one ``torch.stack(n[, dim])`` after the loop when that is the only read of ``n``
    outside the loop's body, else None."""
    inside = {id(x) for x in ast.walk(loop)}
    stacks, others = [], 0
    parents = {id(child): parent for parent in walk_local(func.body)
               for child in ast.iter_child_nodes(parent)}
    for x in walk_local(func.body):
        if not (isinstance(x, ast.Name) and x.id == n and isinstance(x.ctx, ast.Load)) \
                or id(x) in inside:
            continue
        call = parents.get(id(x))
        if _is_stack_of(call, x) and x.lineno > (loop.end_lineno or loop.lineno):
            stacks.append(call)
        else:
            others += 1
    return stacks[0] if len(stacks) == 1 and not others else None


def _is_stack_of(call: ast.AST, arg: ast.Name) -> bool:
    if not (isinstance(call, ast.Call) and call.args and call.args[0] is arg
            and isinstance(call.func, ast.Attribute) and call.func.attr == "stack"
            and isinstance(call.func.value, ast.Name) and call.func.value.id == "torch"):
        return False
    dims = call.args[1:] + [k.value for k in call.keywords if k.arg == "dim"]
    return len(dims) <= 1 and all(k.arg == "dim" for k in call.keywords) and all(
        isinstance(d, ast.Constant) and isinstance(d.value, int) or (
            isinstance(d, ast.UnaryOp) and isinstance(d.op, ast.USub)
            and isinstance(d.operand, ast.Constant)) for d in dims)


def _bound_once_before(n: str, loop: ast.For, func: ast.FunctionDef) -> bool:
    """``n`` is bound once in the function, to an empty list, before the loop."""
    stores = [x for x in walk_local(func.body)
              if isinstance(x, ast.Name) and x.id == n and isinstance(x.ctx, ast.Store)]
    if len(stores) != 1 or stores[0].lineno >= loop.lineno:
        return False
    for x in walk_local(func.body):
        if isinstance(x, ast.Assign) and any(t is stores[0] for t in ast.walk(x)):
            value = x.value
            if isinstance(value, ast.Tuple | ast.List) and isinstance(x.targets[0], ast.Tuple):
                value = value.elts[[t is stores[0] for t in x.targets[0].elts].index(True)]
            return isinstance(value, ast.List) and not value.elts or (
                isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
                and value.func.id == "list" and not value.args)
    return False
