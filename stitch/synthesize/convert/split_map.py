"""Split by sizes from data, map each segment, concatenate: one ``torch.while_loop``.

    lengths = cu_seqlens[1:] - cu_seqlens[:-1]
    splits = [torch.split(t, lengths.tolist(), dim=2) for t in (q, k, v)]
    outs = [attend(a, b, c)[0] for a, b, c in zip(*splits)]
    out = torch.cat(outs, dim=1)
->
    lengths = cu_seqlens[1:] - cu_seqlens[:-1]
    out = __stitch_rt__.split_map_cat(lambda a, b, c: attend(a, b, c)[0], (q, k, v),
                                      lengths, 2, 1, "file:line")

``sizes.tolist()`` of a tensor whose length is known only at run time has no value while
tracing (packed variable-length attention in 33 transformers vision towers: one segment per
image or frame of a grid from data). The comprehension between the split and the
concatenation is the loop's body (``rt_segments``: the plain Python in eager; traced, a
while_loop over the segments writing each result at its place).

Recognised, in one statement block, where a break site lies on one of its lines:
``torch.cat(<parts>, dim)`` whose parts are a comprehension (inline, or a name bound to one
just for it) over the segments of one or more splits by the same ``<tensor>.tolist()`` along
the same dimension: ``torch.split(t, s.tolist(), dim)`` or ``t.split(s.tolist(), dim)``,
iterated alone, zipped (``zip(a, b)``) or from a list of splits (``zip(*splits)``);
anything else (a filter, several generators, a split name read elsewhere) is left as written,
and the break stays a refusal naming its line. The concatenation must be what its statement
evaluates first (its value, or a method's receiver), and the bindings it uses up must come
right before it: a statement in between could rebind or write in place what the rewrite
moves to the concatenation (`h.clamp_()` between the comprehension and the cat, `x`
rebound inside the `with` holding the cat: either would give a wrong program).
"""

from __future__ import annotations

import ast
import linecache
from dataclasses import dataclass, field

from capture import BreakKind, BreakSite

from ...plan import Action
from ..analysis.context import RewriteContext
from ..analysis.names import rt_call, statement_blocks, walk_local
from ..operators.rt_segments import SEGMENTS


@dataclass
class _Match:
    cat: ast.Call
    comp: ast.ListComp | ast.GeneratorExp
    tensors: list[ast.expr]
    sizes: ast.expr
    split_dim: int
    cat_dim: int
    split_call: ast.Call
    dead: list[ast.stmt] = field(default_factory=list)  # bindings the rewrite makes unused


KINDS = (BreakKind.DYNAMIC_SHAPE, BreakKind.SCALAR_READ, BreakKind.UNSUPPORTED_CALL)


def may_apply(site: BreakSite) -> bool:
    """A census site this pass may fix: a break on a line that splits by a ``.tolist()``
    (read from the source, cheap)."""
    if site.kind not in KINDS:
        return False
    text = linecache.getline(site.filename, site.lineno)
    return ".tolist()" in text and "split(" in text


def split_maps(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    if not ctx.sites:
        return
    changed = True
    while changed:  # statements are removed: scan again after each rewrite
        changed = False
        for block in statement_blocks(func.body):
            for j, stmt in enumerate(block):
                match = _match(func, block, j, stmt)
                if match is None or not _has_site(match, stmt, ctx):
                    continue
                _apply(match, block, ctx)
                changed = True
                break
            if changed:
                break


def _has_site(match: _Match, stmt: ast.stmt, ctx: RewriteContext) -> bool:
    spans = [(s.lineno, s.end_lineno or s.lineno) for s in (*match.dead, stmt)]
    return any(lo <= line <= hi for line in ctx.sites for lo, hi in spans)


def _apply(match: _Match, block: list[ast.stmt], ctx: RewriteContext) -> None:
    comp = match.comp
    target = comp.generators[0].target
    params = [target.id] if isinstance(target, ast.Name) else [e.id for e in target.elts]
    body = ast.Lambda(args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=p) for p in params],
                                         kwonlyargs=[], kw_defaults=[], defaults=[]),
                      body=comp.elt)
    site = f"{ctx.filename}:{match.split_call.lineno}"
    call = rt_call("split_map_cat", body, ast.Tuple(elts=match.tensors, ctx=ast.Load()),
                   match.sizes, ast.Constant(match.split_dim), ast.Constant(match.cat_dim),
                   ast.Constant(site))
    _replace(match.cat, call)
    for stmt in match.dead:
        block.remove(stmt)
    ctx.decide(Action.WHILE_LOOP, match.split_call,
               f"{SEGMENTS}: one torch.while_loop over the segments of "
               f"`{ast.unparse(match.sizes)}.tolist()`, each result written at its place "
               "(the plain Python in eager)")


def _replace(old: ast.Call, new: ast.Call) -> None:
    """``old`` becomes ``new`` in place (its parent keeps pointing at it)."""
    ast.copy_location(new, old)
    old.func, old.args, old.keywords = new.func, new.args, new.keywords
    ast.fix_missing_locations(old)


def _match(func: ast.FunctionDef, block: list[ast.stmt], j: int, stmt: ast.stmt) -> _Match | None:
    cat = _statement_cat(stmt)
    return None if cat is None else _match_cat(func, block, j, cat)


def _statement_cat(stmt: ast.stmt) -> ast.Call | None:
    """The concatenation a simple statement evaluates first: its value, or the receiver of a
    method called on it (``torch.cat(...).reshape(n, -1)``). Nothing else in the statement
    runs before it, and nothing nested (a cat inside a ``with`` or a loop body is matched in
    its own block, with the statements before it there)."""
    if not isinstance(stmt, ast.Assign | ast.AnnAssign | ast.Return | ast.Expr):
        return None
    value = stmt.value
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
            and not _is_cat(value):
        value = value.func.value
    return value if value is not None and _is_cat(value) else None


def _match_cat(func, block, j, cat: ast.Call) -> _Match | None:
    if len(cat.args) < 1:
        return None
    cat_dim = _dim(cat.args[1:], cat.keywords)
    if cat_dim is None:
        return None
    parts, dead = cat.args[0], []
    if isinstance(parts, ast.Name):
        bound = _sole_binding(func, block, j, parts.id)
        if bound is None or not isinstance(_unwrapped(bound.value), ast.ListComp | ast.GeneratorExp):
            return None
        parts, dead = bound.value, [bound]
    parts = _unwrapped(parts)
    if not isinstance(parts, ast.ListComp | ast.GeneratorExp) or len(parts.generators) != 1:
        return None
    gen = parts.generators[0]
    if gen.ifs or gen.is_async or not _flat_target(gen.target):
        return None
    splits = _segments(func, block, j, gen.iter, dead)
    if splits is None:
        return None
    tensors, sizes, split_dim, first = splits
    width = 1 if isinstance(gen.target, ast.Name) else len(gen.target.elts)
    if width != len(tensors) or (isinstance(gen.target, ast.Name) and _zipped(gen.iter)):
        return None
    moved = [*tensors, sizes, parts.elt]
    if not _unchanged_between(block, dead, j, moved):
        return None
    return _Match(cat, parts, tensors, sizes, split_dim, cat_dim, first, dead)


def _segments(func, block, j, it: ast.expr, dead: list):
    """(tensors, sizes, dim, first split call) where ``it`` iterates over the segments of
    splits by one ``sizes.tolist()`` along one dim; ``dead`` gets the bindings used up."""
    calls: list[tuple] = []  # (the split call, its (tensor, sizes, dim))
    if _zipped(it) and len(it.args) == 1 and isinstance(it.args[0], ast.Starred):
        holder = it.args[0].value  # zip(*splits), splits = [split(t, ...) for t in (a, b)]
        if not isinstance(holder, ast.Name):
            return None
        bound = _sole_binding(func, block, j, holder.id)
        comp = bound.value if bound is not None else None
        if not isinstance(comp, ast.ListComp) or len(comp.generators) != 1:
            return None
        gen = comp.generators[0]
        if gen.ifs or not isinstance(gen.target, ast.Name) \
                or not isinstance(gen.iter, ast.Tuple | ast.List):
            return None
        split = _split(comp.elt)
        if split is None or not (isinstance(split[0], ast.Name) and split[0].id == gen.target.id):
            return None
        if any(gen.target.id in _loads(e) for e in (split[1],)):
            return None
        dead.append(bound)
        return list(gen.iter.elts), split[1], split[2], comp.elt
    items = list(it.args) if _zipped(it) else [it]
    if not items or any(isinstance(i, ast.Starred) for i in items):
        return None
    tensors = []
    for item in items:
        if isinstance(item, ast.Name):
            bound = _sole_binding(func, block, j, item.id)
            if bound is None:
                return None
            dead.append(bound)
            item = bound.value
        split = _split(item)
        if split is None:
            return None
        tensors.append(split[0])
        calls.append((item, split))
    sizes = {ast.dump(s[1]) for _, s in calls}
    dims = {s[2] for _, s in calls}
    if len(sizes) != 1 or len(dims) != 1:
        return None
    return tensors, calls[0][1][1], dims.pop(), calls[0][0]


def _split(node: ast.expr):
    """(tensor, sizes, dim) of ``torch.split(t, sizes.tolist(), dim)`` or
    ``t.split(sizes.tolist(), dim)``, else None."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute) \
            or node.func.attr != "split":
        return None
    receiver = node.func.value
    if isinstance(receiver, ast.Name) and receiver.id == "torch":
        if not node.args:
            return None
        tensor, rest = node.args[0], node.args[1:]
    else:
        tensor, rest = receiver, node.args
    keywords = {k.arg: k.value for k in node.keywords}
    if None in keywords or set(keywords) - {"split_size_or_sections", "split_size", "dim"}:
        return None
    sizes = rest[0] if rest else keywords.get("split_size_or_sections",
                                              keywords.get("split_size"))
    if not (isinstance(sizes, ast.Call) and isinstance(sizes.func, ast.Attribute)
            and sizes.func.attr == "tolist" and not sizes.args and not sizes.keywords):
        return None
    dim = _dim(rest[1:], [k for k in node.keywords if k.arg == "dim"])
    return None if dim is None else (tensor, sizes.func.value, dim)


def _dim(args: list, keywords: list) -> int | None:
    """The constant int ``dim`` given positionally or as ``dim=`` (0 when absent)."""
    values = [*args, *(k.value for k in keywords)]
    if len(values) > 1 or any(k.arg != "dim" for k in keywords):
        return None
    if not values:
        return 0
    value = values[0]
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub) \
            and isinstance(value.operand, ast.Constant):
        value = ast.Constant(-value.operand.value)
    ok = isinstance(value, ast.Constant) and type(value.value) is int
    return value.value if ok else None


def _unwrapped(parts: ast.expr) -> ast.expr:
    """The comprehension in ``tuple(<generator>)`` or ``list(<generator>)``, else ``parts``."""
    if isinstance(parts, ast.Call) and isinstance(parts.func, ast.Name) \
            and parts.func.id in ("tuple", "list") and len(parts.args) == 1 \
            and not parts.keywords and isinstance(parts.args[0], ast.GeneratorExp):
        return parts.args[0]
    return parts


def _is_cat(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("cat", "concat", "concatenate")
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "torch"
            and all(k.arg == "dim" for k in node.keywords))


def _zipped(node: ast.expr) -> bool:
    """``zip(...)``, with ``strict=`` at most (the splits have one number of segments)."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "zip" and all(k.arg == "strict" for k in node.keywords))


def _flat_target(target: ast.expr) -> bool:
    return isinstance(target, ast.Name) or (
        isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts))


def _sole_binding(func, block, j, name: str) -> ast.Assign | None:
    """The statement before ``block[j]`` in the block that binds ``name`` (a plain
    ``name = ...``), where ``name`` is bound nowhere else in the function and read once."""
    stores = [n for n in walk_local(func.body) if isinstance(n, ast.Name) and n.id == name
              and not isinstance(n.ctx, ast.Load)]
    loads = [n for n in _walk_all(func.body) if isinstance(n, ast.Name) and n.id == name
             and isinstance(n.ctx, ast.Load)]
    if len(stores) != 1 or len(loads) != 1:
        return None
    for stmt in block[:j]:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
                and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id == name:
            return stmt
    return None


def _walk_all(nodes):
    """Every node, nested scopes included (a lambda reading the name is a read too)."""
    for node in nodes:
        yield from ast.walk(node)


def _loads(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _unchanged_between(block, dead: list[ast.stmt], j: int, moved: list[ast.expr]) -> bool:
    """The moved expressions are evaluated at the concatenation after the rewrite: nothing
    may run between the first binding used up and it but those bindings (a name rebound, a
    tensor written in place, a call that writes one through an alias: none is checked for,
    all are ruled out), and the comprehension's element binds no name (a walrus)."""
    if any(isinstance(n, ast.NamedExpr) for e in moved for n in ast.walk(e)):
        return False
    if not dead:
        return True
    first = min(block.index(s) for s in dead)
    return all(stmt in dead for stmt in block[first:j])
