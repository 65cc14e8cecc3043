"""A write into a local container inside a data-dependent branch becomes a rebinding::

    out = {"h": h}                        out = {"h": h}
    if h.mean() > 0:               ->     if h.mean() > 0:
        out["pos"] = h.clamp(min=0)           out = {**out, "pos": h.clamp(min=0)}
    seen.append(v)                        seen = [*seen, v]

A cond's arm cannot change an object made outside it (torch.cond refuses: "mutating a
variable from outside the scope"), but it can give a name a new value, which the branch
then carries like any other (a dict whose keys differ by side is rebuilt from the cond's
flag after the graph, as for any value of two structures). The rebinding is the same
program only where nothing else refers to the container: the name is the function's own,
every binding of it makes a new dict (or list), and before the branch it is read only
through its items (``out["h"]``, ``"h" in out``, ``out.get``, ``len(out)``), never handed
on or stored, so no other reference sees the old object. Writes covered: ``d[k] = v``,
``d.update(m)`` on a dict (``m`` a dict display or another such dict: ``update`` also takes
pairs, which ``{**m}`` does not); ``l.append(v)``, ``l.extend(vs)`` on a list. Others
(``pop``, ``del``, an item of a list set, ``+=`` on an item) are left as written.
"""

from __future__ import annotations

import ast

from ..analysis.context import RewriteContext
from ..analysis.names import walk_local

_READS = frozenset({"get", "keys", "values", "items", "copy", "index", "count"})
_DICT_MADE = (ast.Dict, ast.DictComp)
_LIST_MADE = (ast.List, ast.ListComp)


def container_writes(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    kinds = fresh_containers(func)
    if not kinds:
        return
    for node in list(walk_local(func.body)):
        if isinstance(node, ast.If) and node.lineno in ctx.dependent_lines:
            for arm in (node.body, node.orelse):
                _rewrite_block(arm, kinds, func, node)


def _rewrite_block(block: list[ast.stmt], kinds: dict[str, str], func: ast.FunctionDef,
                   branch: ast.If) -> None:
    for i, stmt in enumerate(block):
        made = _rebinding(stmt, kinds)
        if made is not None and _unaliased_before(made[0], func, branch):
            block[i] = ast.copy_location(made[1], stmt)
            ast.fix_missing_locations(block[i])
        for field in ("body", "orelse"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt) \
                    and isinstance(stmt, ast.If | ast.For | ast.While | ast.With):
                _rewrite_block(inner, kinds, func, branch)


def _rebinding(stmt: ast.stmt, kinds: dict[str, str]) -> tuple[str, ast.Assign] | None:
    """``(name, name = <new container>)`` for a covered write, else None."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
            and isinstance(stmt.targets[0], ast.Subscript):
        target = stmt.targets[0]
        n = _name(target.value)
        if n is None or kinds.get(n) != "dict" or isinstance(target.slice, ast.Slice):
            return None
        value = ast.Dict([None, target.slice], [ast.Name(n, ast.Load()), stmt.value])
        return n, _assign(n, value)
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Attribute)):
        return None
    call = stmt.value
    n = _name(call.func.value)
    if n is None or call.keywords or len(call.args) != 1 \
            or isinstance(call.args[0], ast.Starred):
        return None
    old, arg, method = ast.Name(n, ast.Load()), call.args[0], call.func.attr
    if kinds.get(n) == "list" and method == "append":
        return n, _assign(n, ast.List([ast.Starred(old, ast.Load()), arg], ast.Load()))
    if kinds.get(n) == "list" and method == "extend":
        return n, _assign(n, ast.List([ast.Starred(old, ast.Load()),
                                       ast.Starred(arg, ast.Load())], ast.Load()))
    if kinds.get(n) == "dict" and method == "update" and (
            isinstance(arg, _DICT_MADE) or kinds.get(_name(arg) or "") == "dict"):
        return n, _assign(n, ast.Dict([None, None], [old, arg]))
    return None


def _assign(n: str, value: ast.expr) -> ast.Assign:
    for node in ast.walk(value):  # the old container, read to make the new one
        if isinstance(node, ast.Name) and node.id == n:
            node._stitch_rebound = True
    return ast.Assign([ast.Name(n, ast.Store())], value)


def _name(node: ast.expr) -> str | None:
    return node.id if isinstance(node, ast.Name) else None


def fresh_containers(func: ast.FunctionDef) -> dict[str, str]:
    """Names the function binds only to new dicts (or only to new lists), by one-target
    assignments or a tuple of names given a tuple display (``seen, d = [], {}``): ``"dict"``
    or ``"list"`` by name. A parameter, a global, a name any other statement stores (another
    tuple target, a loop, ``with ... as``, a walrus, ``+=``, ``del``) or one a nested function
    or lambda refers to is left out."""
    args = func.args
    out = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    out |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    kinds: dict[str, str] = {}
    plain: set[int] = set()
    for node in walk_local(func.body):
        if isinstance(node, ast.Global | ast.Nonlocal):
            out.update(node.names)
        for target, value in _pairs(node):
            n, kind = target.id, _made_kind(value)
            plain.add(id(target))
            kinds[n] = kind if kind is not None and kinds.get(n, kind) == kind else "mixed"
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            out.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name))
    out |= {n.id for n in walk_local(func.body) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Store | ast.Del) and id(n) not in plain}
    return {n: k for n, k in kinds.items() if k in ("dict", "list") and n not in out}


def _pairs(node: ast.AST) -> list[tuple[ast.Name, ast.expr]]:
    """(target, value) of each name an assignment binds to its own value: ``n = v``, and
    ``a, b = va, vb`` (a display of as many items, none starred), else none."""
    if not isinstance(node, ast.Assign) or len(node.targets) != 1:
        return []
    target, value = node.targets[0], node.value
    if isinstance(target, ast.Name):
        return [(target, value)]
    if isinstance(target, ast.Tuple | ast.List) and isinstance(value, ast.Tuple | ast.List) \
            and len(target.elts) == len(value.elts) \
            and all(isinstance(t, ast.Name) for t in target.elts) \
            and not any(isinstance(v, ast.Starred) for v in value.elts):
        return list(zip(target.elts, value.elts, strict=True))
    return []


def _made_kind(value: ast.expr) -> str | None:
    if isinstance(value, _DICT_MADE):
        return "dict"
    if isinstance(value, _LIST_MADE):
        return "list"
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) \
            and value.func.id in ("dict", "list"):
        return value.func.id
    return None


def _unaliased_before(n: str, func: ast.FunctionDef, branch: ast.If) -> bool:
    """Before the branch ends, ``n`` is read only through its items: no other reference to
    the container can exist to see the object the rebinding leaves behind."""
    end = branch.end_lineno or branch.lineno
    loops = [node for node in walk_local(func.body) if isinstance(node, ast.For | ast.While)
             and node.lineno <= branch.lineno <= (node.end_lineno or node.lineno)]
    if loops:  # a later pass of the loop runs the statements after the branch first
        end = max(end, *(loop.end_lineno or loop.lineno for loop in loops))
    parents = {id(child): node for node in walk_local(func.body)
               for child in ast.iter_child_nodes(node)}
    for node in walk_local(func.body):
        if not (isinstance(node, ast.Name) and node.id == n and isinstance(node.ctx, ast.Load)
                and node.lineno <= end):
            continue
        parent = parents.get(id(node))
        if isinstance(parent, ast.Subscript) and parent.value is node:
            continue  # out["h"] (read or written)
        if isinstance(parent, ast.Attribute) and parent.value is node \
                and parent.attr in _READS | {"append", "extend", "update"}:
            continue  # out.get(...), or a write this pass rewrites (or refuses to)
        if isinstance(parent, ast.Compare) and node in parent.comparators \
                and all(isinstance(op, ast.In | ast.NotIn) for op in parent.ops):
            continue  # "h" in out
        if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) \
                and parent.func.id == "len" and parent.args == [node]:
            continue
        if getattr(node, "_stitch_rebound", False):
            continue  # an earlier write this pass rewrote
        return False
    return True
