"""Python state a data-dependent branch sets, replayed after the graph when the branch ran::

    if h.sum() > 0:                              (in the arm)
        type(self).last = (h.sum(), 3)    ->       __stitch_set_1 = (h.sum(), 3)
        self.levels = [h * 0.5, h.mean(0)]         __stitch_rt__.set_state(type(self), "last",
        h = h + self.levels[1] * 0.1                                       __stitch_set_1)
                                                   __stitch_set_2 = [h * 0.5, h.mean(0)]
                                                   __stitch_rt__.set_state(self, "levels", ...)
                                                   h = h + __stitch_set_2[1] * 0.1

A class attribute (``type(self).x``, ``Model.x``), an attribute of a module object, or a
model attribute set to a container (a cond carries tensors, not lists) cannot leave a
``torch.cond``. The arm keeps the new value in a local name (its own later reads use it) and
makes a ``set_state`` call, which ``branch_effects`` defers like a print: the cond returns the
value's tensors and a flag, and the epilogue sets the attribute (a ``rebind`` entry guarded by
the flag) only when the branch ran — exactly as the forward would. Exact only for state the
forward never reads before setting it (``capture/rebound.py`` measures that; the export traces
with the old value unusable, so a read after the branch fails the export), and verified like
any other state, on every example and forced side.

A counter (``type(self).hits += 1``, ``self.skipped -= n``: a number python_state measured
every call only adds to) becomes an ``add_state`` call the same way: the epilogue adds the
number (a guarded ``add`` entry) when the branch ran.
"""

from __future__ import annotations

import ast

from ...epilogue.targets import counter_attribute, item_dict
from ..analysis.names import SCOPES, name, rt_call, stored_names, walk_local
from .carried_state import refuse_stale_reads
from .state_targets import (
    is_module,
    module_owner,
    outside_owner,
    outside_target,
    read_local,
)


def _counter_add(stmt: ast.stmt, local: set[str]) -> list[ast.stmt] | None:
    """``X.attr += v`` (``-= v``, ``X.attr = X.attr + a - b``) on a counter python_state
    measured (an attribute of ``self`` or of a class/module/parameter, a number only ever
    added to), or a change of a measured dict's item (``_item_change``), as ``add_state``
    calls, one per addend in the statement's order: the epilogue adds them when the branch
    ran (``x - v`` is ``x + (-v)`` exactly)."""
    item = _item_change(stmt, local)
    if item is not None:
        return item
    found = _additions(stmt)
    if found is None or not isinstance(found[0], ast.Attribute) \
            or not counter_attribute(found[0].attr):
        return None
    owner = found[0].value
    outside = outside_owner(owner) or (
        isinstance(owner, ast.Name) and (owner.id == "self" or owner.id not in local))
    if not outside:
        return None
    return [ast.copy_location(ast.Expr(rt_call(
        "add_state", owner, ast.Constant(found[0].attr), v)), stmt) for v in found[1]]


def _additions(stmt: ast.stmt) -> tuple[ast.expr, list[ast.expr]] | None:
    """``(target, addends)`` when ``stmt`` only adds to ``target``: ``t += v``, ``t -= v``,
    ``t = t + a - b`` (left to right), ``t = v + t``; subtrahends negated."""
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, ast.Add | ast.Sub):
        return stmt.target, [_signed(stmt.op, stmt.value)]
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
        return None
    target, value = stmt.targets[0], stmt.value
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add) \
            and _reads(value.right, target):
        return target, [value.left]
    terms: list[ast.expr] = []
    while isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add | ast.Sub):
        terms.insert(0, _signed(value.op, value.right))
        value = value.left
    return (target, terms) if terms and _reads(value, target) else None


def _reads(expr: ast.expr, target: ast.expr) -> bool:
    """``expr`` reads what ``target`` stores: the same expression, or for an item ``d[k]``
    also ``d.get(k)`` / ``d.get(k, default)`` (a counter kept in a dict, ``STATS["hot"] =
    STATS.get("hot", 0) + 1``: the default is only read where the item is missing, which the
    epilogue's start value covers)."""
    if ast.dump(expr) == ast.dump(_loaded(target)):
        return True
    return (isinstance(target, ast.Subscript) and isinstance(expr, ast.Call)
            and isinstance(expr.func, ast.Attribute) and expr.func.attr == "get"
            and 1 <= len(expr.args) <= 2 and not expr.keywords
            and ast.dump(expr.func.value) == ast.dump(_loaded(target.value))
            and ast.dump(expr.args[0]) == ast.dump(target.slice))


def _signed(op: ast.operator, value: ast.expr) -> ast.expr:
    return value if isinstance(op, ast.Add) else ast.UnaryOp(ast.USub(), value)


def _loaded(node: ast.expr) -> ast.expr:
    """``node`` as an expression that reads it (the same dump as a load of it)."""
    import copy

    node = copy.deepcopy(node)
    node.ctx = ast.Load()
    return node


def _item_change(stmt: ast.stmt, local: set[str]) -> list[ast.stmt] | None:
    """``D[k] = v`` / ``D[k] += v`` / ``D[k] = D[k] - v`` on a dict python_state measured
    (an attribute, a class attribute, a module global) as a ``set_item_state`` call or
    ``add_state`` calls: the epilogue sets (adds to) the item when the branch ran."""
    found = _additions(stmt)
    if found is not None and isinstance(found[0], ast.Subscript):
        target, call, values = found[0], "add_state", found[1]
    elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
            and isinstance(stmt.targets[0], ast.Subscript):
        target, call, values = stmt.targets[0], "set_item_state", [stmt.value]
    else:
        return None
    holder = target.value
    named = (holder.attr if isinstance(holder, ast.Attribute)
             else holder.id if isinstance(holder, ast.Name) and holder.id not in local
             else None)
    if named is None or not item_dict(named):
        return None
    start = _get_default(stmt.value) if call == "add_state" else None
    return [ast.copy_location(ast.Expr(rt_call(call, holder, target.slice, v,
                                               *([start] if start is not None else []))), stmt)
            for v in values]


def _get_default(value: ast.expr) -> ast.expr | None:
    """The default of the ``d.get(k, default)`` an item's addition reads (its count where
    the item is missing); None where it reads ``d[k]`` (a missing item raises, as in eager)
    or ``d.get(k)`` (None: the addition raises, as in eager), and for a default that is not
    a number constant (the missing item's replay then raises: verification refuses)."""
    while isinstance(value, ast.BinOp):
        call = value.right if isinstance(value.right, ast.Call) else value.left
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) \
                and call.func.attr == "get" and len(call.args) == 2:
            default = call.args[1]  # a number the epilogue's options can hold
            return default if isinstance(default, ast.Constant) and type(
                default.value) in (int, float) else None
        value = value.left
    return None


def declared_globals(func: ast.AST | None) -> frozenset[str]:
    """Names ``func`` declares ``global`` (in its own body, not in nested scopes)."""
    if func is None:
        return frozenset()
    return frozenset(n for node in walk_local(getattr(func, "body", []))
                     if isinstance(node, ast.Global) for n in node.names)


class _GlobalsAsAttributes(ast.NodeTransformer):
    """``X`` (a name the function declares ``global``) as ``module.X``, read or set by a
    plain or augmented assignment: an arm function setting ``X`` would bind a local of that
    name (UnboundLocalError); as the module's attribute, the rest of this pass replays it
    like ``module.X = v`` (``X += v`` on a measured counter: an ``add_state``)."""

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if node.id not in self.names:
            return node
        if not isinstance(node.ctx, ast.Load) and not getattr(node, "_stitch_settable", False):
            raise ValueError(node.id)  # unpacked into, a loop target, deleted: not replayed
        return ast.copy_location(ast.Attribute(module_owner(), node.id, node.ctx), node)

    def visit_Assign(self, node: ast.Assign) -> ast.Assign:
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            node.targets[0]._stitch_settable = True
        return self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AugAssign:
        if isinstance(node.target, ast.Name):
            node.target._stitch_settable = True
        return self.generic_visit(node)

    def _scope(self, node):  # a nested function or class: its own names
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = _scope


def globals_as_attributes(arm: list[ast.stmt], declared: frozenset[str]) -> str | None:
    """Rewrite, in place, the ``global`` names ``arm`` sets as the module's attributes
    (reads included); None, or why it cannot (the name set as a loop target, by unpacking,
    ``del``)."""
    names = frozenset(declared) & set(stored_names(arm))
    if not names:
        return None
    for i, stmt in enumerate(arm):
        try:
            arm[i] = ast.fix_missing_locations(_GlobalsAsAttributes(names).visit(stmt))
        except ValueError as e:
            return (f"a branch sets module global `{e}` otherwise than `{e} = ...` or "
                    f"`{e} += ...`; stitch replays those two forms")
    return None


def state_sets_as_calls(arms: list[list[ast.stmt]], local: set[str], n: int,
                        place: tuple[ast.If, ast.FunctionDef] | None = None) -> int:
    """Rewrite, in place, every state set in ``arms`` (at any depth of their blocks) into a
    local value and a ``set_state`` call; the arm's later reads of that attribute read the
    local. Returns how many were rewritten. ``place``: the branch (as it stands in its
    function) and the function, where reads after it are checked first."""
    if place is not None:
        refuse_stale_reads([s for arm in arms for s in arm], *place, local)
    count = 0
    for arm in arms:
        count = _block(arm, local, n, count, {})
    return count


def _block(block: list[ast.stmt], local: set[str], n: int, count: int,
           names: dict[tuple[str, str], str]) -> int:
    """``names``: the local each attribute set in this arm is kept in. One per attribute,
    whichever set made it: a read after a second set (`self.x = a; ...; self.x = b; use
    self.x`) reads the value of the last set that ran, as the forward does."""
    i = 0
    while i < len(block):
        stmt = block[i]
        added = _counter_add(stmt, local)
        if added is not None:
            block[i:i + 1] = added
            count += 1
            i += len(added)
            continue
        if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Attribute) \
                and is_module(stmt.target.value):  # not a counter: a set
            stmt = block[i] = ast.copy_location(ast.Assign([stmt.target], ast.BinOp(
                _loaded(stmt.target), stmt.op, stmt.value)), stmt)
        target = outside_target(stmt, local)
        if target is not None:
            key = (ast.dump(target.value), target.attr)
            if key not in names:
                count += 1
                names[key] = f"__stitch_set{n}_{count}"
            value = names[key]
            owner = target.value
            keep = ast.copy_location(ast.Assign([name(value, True)], stmt.value), stmt)
            call = ast.copy_location(ast.Expr(rt_call(
                "set_state", owner, ast.Constant(target.attr), name(value))), stmt)
            rest = block[i + 1:]
            read_local(rest, ast.dump(target.value), target.attr, value)
            block[i:i + 1] = [keep, call]
            i += 2
            continue
        if not isinstance(stmt, SCOPES):
            for field_name in ("body", "orelse", "finalbody"):
                inner = getattr(stmt, field_name, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    count = _block(inner, local, n, count, names)
        i += 1
    return count
