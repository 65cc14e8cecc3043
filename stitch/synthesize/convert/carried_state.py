"""Attributes of objects from outside the function (a parameter's, a closure variable's) that
a branch sets and the function reads after it: carried out of the cond to those reads, or
the branch refused naming them (``carried_state``, ``refuse_stale_reads``)::

    def helper(h, owner):                     def helper(h, owner):
        owner.h = h                               owner.h = h
        if h.sum() > 0:                           ... cond: each arm sets (deferred) and
            owner.h = h * 2          ->           carries __stitch_attr_of_owner__h ...
        return h + owner.h                        hold_state(owner, "h", __stitch_attr_of_owner__h)
                                                  return h + __stitch_attr_of_owner__h
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from ..analysis.context import RewriteRefused
from ..analysis.names import name, path_to, rt_call, stored_names, walk_local
from .branch_inplace import CARRIER, original_of
from .state_targets import is_module, outside_target, read_local


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


def _after_in_block(anchor: ast.If, func: ast.FunctionDef) -> list[ast.stmt]:
    """The statements after ``anchor`` in its own block."""
    path = path_to(func.body, anchor) or []
    return path[-1][0][path[-1][1] + 1:] if path else []


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
    loop around the branch too), and the reads after the branch in its own block read the
    carried name (inside another cond's arm the object is not written); the set itself is
    replayed after the graph. Refused (``refuse_stale_reads``) where an arm
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

    # the reads after the branch in its own block read the carried name (the object is not
    # written inside an arm); the reads further out read the object, which holds the value
    # there (``hold_state``) or which an enclosing cond carries in turn: the name may be
    # unbound on a path that did not run this branch (the other side of a Python ``if``)
    own_block = _after_in_block(anchor, func)

    def read_carried() -> list[ast.stmt]:
        for owner, attr in pairs:
            read_local(own_block, ast.dump(name(owner)), attr, _carried(owner, attr))
        return [ast.Expr(rt_call("hold_state", name(owner), ast.Constant(attr),
                                 name(_carried(owner, attr)))) for owner, attr in pairs]
    return read_carried


def _sets_anywhere(arm: list[ast.stmt], owner: str, attr: str, local: set[str]) -> bool:
    """A statement of ``arm``, at any depth, sets ``owner.attr``."""
    return any((t := outside_target(s, local)) is not None and isinstance(t.value, ast.Name)
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
    return any(((t := outside_target(s, local)) is not None and isinstance(t.value, ast.Name)
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
                and (t := outside_target(stmt, local)) is not None
                and isinstance(t.value, ast.Name) and t.value.id != "self"
                and not is_module(t.value)}
    # an inner branch already a cond sets it through its carried name (the go flag's ``if``
    # around a bounded loop's pass holds the pass's cond)
    set_here |= _carried_names(arms, ast.Store)
    read = {(n.value.id, n.attr) for n in walk_local(after) if isinstance(n, ast.Attribute)
            and isinstance(n.ctx, ast.Load) and isinstance(n.value, ast.Name)}
    # a read an inner branch's rewrite already made a read of its carried name
    read |= _carried_names(after, ast.Load)
    return sorted(f"{owner}.{attr}" for owner, attr in set_here & read)


def _carried_names(stmts: list[ast.stmt], ctx: type) -> set[tuple[str, str]]:
    """(owner, attr) of each carried name ``stmts`` store or load (by ``ctx``)."""
    return {tuple(n.id.removeprefix(CARRIED_STATE).split("__", 1)) for n in walk_local(stmts)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)
            and n.id.startswith(CARRIED_STATE)}
