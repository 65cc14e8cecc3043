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
from collections.abc import Callable

from ...epilogue.targets import counter_attribute, item_dict
from ..analysis.context import RewriteRefused
from ..analysis.names import SCOPES, name, path_to, rt_call, stored_names, walk_local
from .branch_inplace import CARRIER, original_of

# displays a cond cannot carry as a model attribute (``self.x = h`` is carried as a tensor)
_DISPLAYS = (ast.List, ast.Tuple, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)


def _outside_target(stmt: ast.stmt, local: set[str]) -> ast.Attribute | None:
    """The attribute ``stmt`` sets when it is state outside the graph: ``type(self).x``,
    ``Name.x`` for a name the function does not bind (a class, a module), or ``self.x`` set
    to a container."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Attribute)):
        return None
    target = stmt.targets[0]
    owner = target.value
    if _outside_owner(owner):
        return target
    if isinstance(owner, ast.Name) and owner.id == "self":
        return target if isinstance(stmt.value, _DISPLAYS) else None
    if isinstance(owner, ast.Name) and owner.id not in local:
        return target
    return None


def _outside_owner(owner: ast.expr) -> bool:
    """``type(self)``, or the module whose globals a branch sets (``_GlobalsAsAttributes``)."""
    return (isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name)
            and owner.func.id == "type") or _is_module(owner)


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
    outside = _outside_owner(owner) or (
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


_MODULE = "__stitch_module__"  # the rewritten function's module (synthesize/convert/functions.py)


def _module_owner() -> ast.expr:
    """The module whose global a branch sets: ``global X; X = v`` is ``module.X = v``."""
    return name(_MODULE)


def _is_module(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == _MODULE


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
        return ast.copy_location(ast.Attribute(_module_owner(), node.id, node.ctx), node)

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


def refuse_stale_reads(arms: list[ast.stmt], anchor: ast.If, func: ast.FunctionDef,
                       local: set[str]) -> None:
    """Refuse a branch whose arms set an attribute of an object from outside the function
    (``owner.h`` in ``def helper(h, owner)``, or with ``owner`` a closure variable),
    deferred to after the graph, that the statements following ``anchor`` read: traced,
    such a read sees the value from before the branch."""
    stale = _stale_reads(arms, _after(anchor, func), func, local)
    if stale:
        raise _stale(stale)


def _after(anchor: ast.If, func: ast.FunctionDef) -> list[ast.stmt]:
    return [s for block, i in path_to(func.body, anchor) or [] for s in block[i + 1:]]


def _stale(stale: list[str]) -> RewriteRefused:
    return RewriteRefused(f"a branch sets `{'`, `'.join(stale)}` (an object from outside the "
                          "function) and "
                          "the function reads it after the branch, and not on every path "
                          "(or also changes or passes the object on after it); stitch "
                          "replays such sets after the graph, so the read would see the old "
                          "value")


def carried_state(node: ast.If, anchor: ast.If, func: ast.FunctionDef,
                  local: set[str]) -> Callable[[], list[ast.stmt]] | None:
    """An attribute of an object from outside the function (a parameter's, a closure
    variable's) that an arm sets (``owner.h = ...``, at the arm's own level) and the
    function reads after the branch: each arm keeps its value in a carried name as well
    (``__stitch_attr_of_owner__h``): the value it set, or, in an arm that sets it nowhere,
    the one the object holds. After the cond the object is given the carried value while
    the model is traced (``hold_state``), so every later read sees it (the next pass of a
    loop around the branch too), and the reads after the branch read the carried name; the
    set itself is replayed after the graph. Refused (``refuse_stale_reads``) where an arm
    sets it only inside a block of its own (it may leave it unset), or where a statement
    after the branch sets it again or passes the object on (a read there may see another
    value). Returns what makes the reads after the branch read the carried names and gives
    the statements that write them back, to run once the branch is rewritten; None for a
    branch that returns (what follows it is in its arms)."""
    if any(isinstance(n, ast.Return) for n in walk_local(node.body + node.orelse)):
        return None
    after = _after(anchor, func)
    stale = _stale_reads(node.body + node.orelse, after, func, local)
    if not stale:
        return lambda: []
    pairs = [tuple(s.split(".", 1)) for s in stale]
    # an arm holding an inner branch already made a cond (an ``elif``) sets the carried
    # name itself: its value is the one the reads after see
    if not all(_sets(arm, owner, attr, local) or _carries(arm, owner, attr)
               or not _sets_anywhere(arm, owner, attr, local)
               for arm in (node.body, node.orelse) for owner, attr in pairs) \
            or any(_changes(after, owner) for owner, _ in pairs):
        raise _stale(stale)
    if not node.orelse:  # an ``if`` without ``else``: the values it keeps are its else
        node.orelse = [ast.copy_location(ast.Pass(), node)]
    for arm in (node.body, node.orelse):
        arm.extend(ast.fix_missing_locations(ast.copy_location(ast.Assign(
            [name(_carried(owner, attr), True)],
            ast.Attribute(name(owner), attr, ast.Load())), arm[-1])) for owner, attr in pairs
            if not _carries(arm, owner, attr))

    def read_carried() -> list[ast.stmt]:
        for owner, attr in pairs:
            _read_local(after, ast.dump(name(owner)), attr, _carried(owner, attr))
        return [ast.Expr(rt_call("hold_state", name(owner), ast.Constant(attr),
                                 name(_carried(owner, attr)))) for owner, attr in pairs]
    return read_carried


def _sets_anywhere(arm: list[ast.stmt], owner: str, attr: str, local: set[str]) -> bool:
    """A statement of ``arm``, at any depth, sets ``owner.attr``."""
    return any((t := _outside_target(s, local)) is not None and isinstance(t.value, ast.Name)
               and t.value.id == owner and t.attr == attr
               for s in walk_local(arm) if isinstance(s, ast.stmt))


CARRIED_STATE = "__stitch_attr_of_"


def _carried(owner: str, attr: str) -> str:
    return f"{CARRIED_STATE}{owner}__{attr}"


def shown(carried: str) -> str:
    """A name a cond carries as the report shows it: ``owner.attr`` for one ``_carried``
    made (a parameter named with ``__`` inside shows split at its first one)."""
    if carried.startswith(CARRIER):
        return f"the object `{original_of(carried)}` held before the if (written in place)"
    if carried.startswith(CARRIED_STATE):
        owner_attr = carried.removeprefix(CARRIED_STATE).replace("__", ".", 1)
        return f"`{owner_attr}` (read after it)"
    return carried


def _carries(arm: list[ast.stmt], owner: str, attr: str) -> bool:
    """A statement of ``arm`` itself binds ``owner.attr``'s carried name (the cond an inner
    branch became returns it)."""
    return _carried(owner, attr) in stored_names(
        [s for s in arm if isinstance(s, ast.Assign)])


def _sets(arm: list[ast.stmt], owner: str, attr: str, local: set[str]) -> bool:
    """A statement of ``arm`` itself sets ``owner.attr``, or an ``if`` of it does on each of
    its sides (an ``elif`` chain: each link sets it)."""
    return any(((t := _outside_target(s, local)) is not None and isinstance(t.value, ast.Name)
                and t.value.id == owner and t.attr == attr)
               or (isinstance(s, ast.If) and s.orelse and _sets(s.body, owner, attr, local)
                   and _sets(s.orelse, owner, attr, local)) for s in arm)


def _changes(stmts: list[ast.stmt], owner: str) -> bool:
    """``stmts`` set an attribute of ``owner``, or hand it to a call or call its methods."""
    for node in walk_local(stmts):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id == owner and not isinstance(node.ctx, ast.Load):
            return True
        if isinstance(node, ast.Call) and any(
                isinstance(a, ast.Name) and a.id == owner
                for a in [*node.args, *(k.value for k in node.keywords), node.func,
                          getattr(node.func, "value", None)]):
            return True
    return False


def _stale_reads(arms: list[ast.stmt], after: list[ast.stmt], func: ast.FunctionDef,
                 local: set[str]) -> list[str]:
    """``owner.attr`` the arms set on an object from outside the function (a parameter, a
    closure variable, a global: any name it does not bind, ``self`` aside, whose container
    sets are the model's own state) that the statements ``after`` the branch read."""
    set_here = {(t.value.id, t.attr) for stmt in walk_local(arms) if isinstance(stmt, ast.stmt)
                and (t := _outside_target(stmt, local)) is not None
                and isinstance(t.value, ast.Name) and t.value.id != "self"
                and not _is_module(t.value)}
    read = {(n.value.id, n.attr) for n in walk_local(after) if isinstance(n, ast.Attribute)
            and isinstance(n.ctx, ast.Load) and isinstance(n.value, ast.Name)}
    # a read an inner branch's rewrite already made a read of its carried name
    read |= {tuple(n.id.removeprefix(CARRIED_STATE).split("__", 1)) for n in walk_local(after)
             if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
             and n.id.startswith(CARRIED_STATE)}
    return sorted(f"{owner}.{attr}" for owner, attr in set_here & read)


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
                and _is_module(stmt.target.value):  # not a counter: a set
            stmt = block[i] = ast.copy_location(ast.Assign([stmt.target], ast.BinOp(
                _loaded(stmt.target), stmt.op, stmt.value)), stmt)
        target = _outside_target(stmt, local)
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
            _read_local(rest, ast.dump(target.value), target.attr, value)
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


def _read_local(stmts: list[ast.stmt], owner: str, attr: str, value: str) -> None:
    """Loads of ``<owner>.<attr>`` in ``stmts`` read the local ``value`` instead."""
    for node in walk_local(stmts):
        for field_name, child in ast.iter_fields(node):
            items = child if isinstance(child, list) else [child]
            for j, item in enumerate(items):
                if (isinstance(item, ast.Attribute) and isinstance(item.ctx, ast.Load)
                        and item.attr == attr and ast.dump(item.value) == owner):
                    new = ast.copy_location(name(value), item)
                    if isinstance(child, list):
                        child[j] = new
                    else:
                        setattr(node, field_name, new)
