"""In-place tensor writes in a branch, as values the cond carries out::

    if p:                                  __stitch_orig_out = out
        v = out[:2]                        def __stitch_true_1(out, ...):
        out.index_add_(0, idx, v)    ->        out = __stitch_rt__.own(out)    # a copy
        self.buf[i] = 0                        v = out[:2]
                                               out.index_add_(0, idx, v)      # as written
                                               __stitch_attr_buf = __stitch_rt__.set_item(...)
                                           ... (out, ...) = cond(...)
                                           out = __stitch_rt__.write_into(__stitch_orig_out, out)

torch.cond forbids a branch to write its operands but allows writing tensors the branch
made. An arm that writes a name bound before the ``if`` (``x.op_(...)``, ``x[i] = v``,
``x[i] op= v``, ``x op= v``, also through ``x[i][j]``, or a nested cond's write-back) starts
by taking a copy of it; every write then runs as written, on the copy, so views taken in the
arm, loops, and writes after a rebinding behave exactly as in eager. The cond returns the
copy and the original tensor is then written with it (``copy_``): the same object holds the
same values as after the eager writes, so every alias made before the ``if`` (a view, a
buffer, a caller's input) sees them.

A name also rebound in the arms (``h.add_(1)`` in one, ``h = h * 2`` in the other; or a
write, then a rebinding) keeps the copy in a second name, ``__stitch_held<n>_h``, carried beside
``h`` and written back; after the cond the name holds the carried value (eager's values; a
graph has no data-dependent object identity). Attributes of ``self`` written in place become
assignments that the attribute carrying writes back in place.

Not seen: an alias taken before the ``if`` and read inside the arm after the write (it still
shows the original's values there); verification compares what that changes.
"""

from __future__ import annotations

import ast
import re

from ..analysis.names import SCOPES, is_rt_call, name, rt_call, statement_blocks, walk_local

# ``__stitch_held<n>_<name>``: the copy of the object ``name`` held before the if, for a name
# the arms of cond ``n`` also rebind (numbered: a nested cond's carrier is another name)
CARRIER = "__stitch_held"


def original_of(carried: str) -> str:
    """The name a write-back carrier stands for (``__stitch_held3_h`` -> ``h``; ``h``)."""
    return re.sub(rf"^{CARRIER}\d+_", "", carried)


def _in_place_method(node: ast.stmt) -> tuple[ast.expr, ast.Call] | None:
    call = node.value if isinstance(node, ast.Expr) else None
    if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            and call.func.attr.endswith("_") and not call.func.attr.startswith("_")
            and not call.func.attr.endswith("__")):
        return call.func.value, call
    return None


def _receiver(expr: ast.expr) -> str | None:
    """The carried name of an attribute receiver: ``self.a`` -> ``self.a``."""
    if (isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name)
            and expr.value.id == "self"):
        return f"self.{expr.attr}"
    return None


def _as_value(index: ast.expr) -> ast.expr:
    """A subscript's index as an expression (``a:b`` -> ``slice(a, b, None)``)."""
    if isinstance(index, ast.Slice):
        parts = [p if p is not None else ast.Constant(None)
                 for p in (index.lower, index.upper, index.step)]
        return ast.Call(name("slice"), [_as_value(p) for p in parts], [])
    if isinstance(index, ast.Tuple):
        return ast.Tuple([_as_value(e) for e in index.elts], ast.Load())
    return index


def _store(expr: ast.expr) -> ast.expr:
    out = ast.Name(expr.id, ast.Store()) if isinstance(expr, ast.Name) else \
        ast.Attribute(expr.value, expr.attr, ast.Store())
    return ast.copy_location(out, expr)


def _load(expr: ast.expr) -> ast.expr:
    out = ast.Name(expr.id, ast.Load()) if isinstance(expr, ast.Name) else \
        ast.Attribute(expr.value, expr.attr, ast.Load())
    return ast.copy_location(out, expr)


def _rewrite(stmt: ast.stmt, skip: set[str]) -> tuple[ast.stmt, str] | None:
    """An in-place write on ``self.<attr>`` as an assignment of a written copy."""
    found = _in_place_method(stmt)
    if found is not None:
        receiver, call = found
        key = _receiver(receiver)
        if key is None or key in skip:
            return None
        value = rt_call("in_place", _load(receiver), ast.Constant(call.func.attr), *call.args)
        value.keywords = call.keywords
        return ast.copy_location(ast.Assign([_store(receiver)], value), stmt), key
    target = None
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target, value = stmt.targets[0], stmt.value
    elif isinstance(stmt, ast.AugAssign):
        target = stmt.target
        if isinstance(target, ast.Subscript):
            value = ast.BinOp(ast.Subscript(target.value, target.slice, ast.Load()), stmt.op,
                              stmt.value)
    if not isinstance(target, ast.Subscript):
        return None
    key = _receiver(target.value)
    if key is None or key in skip:
        return None
    new = rt_call("set_item", _load(target.value), _as_value(target.slice), value)
    return ast.copy_location(ast.Assign([_store(target.value)], new), stmt), key


def _root(expr: ast.expr) -> str | None:
    """The name a write reaches through subscripts: ``x``, ``x[i]``, ``x[i][j]`` -> ``x``."""
    while isinstance(expr, ast.Subscript):
        expr = expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def _headers(stmt: ast.stmt) -> list[ast.AST]:
    """What a statement evaluates itself (a compound statement's test or iterable, not its
    blocks: ``statement_blocks`` visits those)."""
    if isinstance(stmt, SCOPES):
        return []
    if isinstance(stmt, ast.If | ast.While):
        return [stmt.test]
    if isinstance(stmt, ast.For):
        return [stmt.iter]
    if isinstance(stmt, ast.With):
        return list(stmt.items)
    if isinstance(stmt, ast.Try):
        return []
    return [stmt]


def _written_names(stmt: ast.stmt, writers: dict | None = None) -> list[str]:
    """The names ``stmt`` writes in place: ``x.op_(...)`` anywhere in it (``y = x.add_(1)``
    too), ``x[i] = v`` (or its ``store_slice``), ``x op= v``, a nested cond's write-back, and the arguments a call
    passes to a helper that writes those parameters in place (``writers``: name ->
    (position, parameter) pairs, ``helper_effects.writing_helpers``)."""
    out = []
    for part in _headers(stmt):
        for node in ast.walk(part):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and _in_place_method(ast.Expr(node)) is not None):
                out.append(_root(node.func.value))
            elif is_rt_call(node, "store_slice") and node.args:  # ``x[a:b] = v`` (slice_bounds)
                out.append(_root(node.args[0]))
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id in (writers or {})):
                for position, param in writers[node.func.id]:
                    passed = [k.value for k in node.keywords if k.arg == param] or (
                        [node.args[position]] if position is not None
                        and position < len(node.args) else [])
                    out += [_root(p) for p in passed]
    if isinstance(stmt, ast.AugAssign):
        out.append(_root(stmt.target))
    if isinstance(stmt, ast.Assign | ast.Expr):  # ``x = write_into(...)``; a returning
        # cond's write-back is a bare call
        if is_rt_call(stmt.value, "write_into") and isinstance(stmt.value.args[0], ast.Name):
            out.append(stmt.value.args[0].id.removeprefix("__stitch_orig_"))
    if isinstance(stmt, ast.Assign):
        out += [_root(t) for t in stmt.targets if isinstance(t, ast.Subscript)]
    return [n for n in out if n is not None]


def written_in_place(arm: list[ast.stmt], writers: dict | None = None) -> dict[str, None]:
    return dict.fromkeys(n for block in statement_blocks(arm) for stmt in block
                         for n in _written_names(stmt, writers))


def _blocks(arms: list[list[ast.stmt]]):
    for arm in arms:
        yield from statement_blocks(arm)


def _plain_stores(stmts: list[ast.stmt], back: set[str]) -> set[str]:
    """Names ``stmts`` rebind. Not counted: ``x op= v`` (a write), and a nested cond's
    result for a name that cond writes back into the same object (``back``:
    ``(x, ...) = cond(...)`` then ``x = write_into(__stitch_orig_x, x)``)."""
    nodes = list(walk_local(stmts))
    skip = {id(n) for a in nodes
            if isinstance(a, ast.Assign) and (is_rt_call(a.value, "cond", "cond_effects")
                                              or is_rt_call(a.value, "write_into"))
            for t in a.targets for n in ast.walk(t)
            if isinstance(n, ast.Name) and n.id in back}
    skip |= {id(a.target) for a in nodes if isinstance(a, ast.AugAssign)}
    return {node.id for node in nodes if isinstance(node, ast.Name)
            and isinstance(node.ctx, ast.Store) and id(node) not in skip}


def _written_back(arms: list[list[ast.stmt]]) -> set[str]:
    """Names a nested cond writes back into the object they held (no carrier)."""
    return {s.targets[0].id for block in _blocks(arms) for s in block
            if isinstance(s, ast.Assign) and is_rt_call(s.value, "write_into")
            and isinstance(s.targets[0], ast.Name)
            and s.targets[0].id == original_of(s.targets[0].id)}


def in_place_as_assignment(arms: list[list[ast.stmt]], bound: set[str], n: int,
                           writers: dict | None = None) -> tuple[list[str], set[str]]:
    """Rewrite the in-place writes in ``arms`` (in place). Returns the carriers of the names
    written in place (bound before the ``if``: written back after the cond with
    ``write_into``; the name itself, or ``__stitch_held<n>_<name>`` for a name also rebound) and
    the attributes of ``self`` written in place (carried and written back in place)."""
    rebound = _plain_stores([s for arm in arms for s in arm], _written_back(arms))
    per_arm = [written_in_place(arm, writers) for arm in arms]
    carriers = []
    for w in dict.fromkeys(w for writes in per_arm for w in writes if w in bound):
        carrier = f"{CARRIER}{n}_{w}" if w in rebound else w
        for arm, writes in zip(arms, per_arm, strict=True):
            if w in writes:  # the arm works on its own copy
                targets = [name(w, True)] + ([name(carrier, True)] if carrier != w else [])
                arm.insert(0, ast.copy_location(ast.Assign(targets, rt_call("own", name(w))),
                                                arm[0]))
        carriers.append(carrier)
    return carriers, _attribute_writes(arms)


def _attribute_writes(arms: list[list[ast.stmt]]) -> set[str]:
    """In-place writes on ``self.<attr>`` as assignments (the attribute carrying writes them
    back in place); a write after the arm rebound the attribute at its top level reaches
    the arm's own new tensor and is left as written. Returns the attributes written."""
    written: dict[str, None] = {}
    for arm in arms:
        fresh: set[str] = set()  # rebound earlier in this arm, at its top level
        for j, top in enumerate(arm):
            done = _rewrite(top, fresh)
            if done is not None:
                arm[j], key = done
                written[key] = None
                continue
            for block in _inner_blocks(top):
                for i, stmt in enumerate(block):
                    inner = _rewrite(stmt, fresh)
                    if inner is not None:
                        block[i], key = inner
                        written[key] = None
            fresh |= _attribute_stores(top)
    return {k.split(".", 1)[1] for k in written}


def _inner_blocks(stmt: ast.stmt):
    if isinstance(stmt, SCOPES):
        return
    for field_name in ("body", "orelse", "finalbody"):
        block = getattr(stmt, field_name, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            yield from statement_blocks(block)


def _attribute_stores(stmt: ast.stmt) -> set[str]:
    """The ``self.`` attributes a plain assignment statement binds (``self.a``)."""
    if not isinstance(stmt, ast.Assign | ast.AugAssign | ast.AnnAssign):
        return set()
    targets = list(stmt.targets) if isinstance(stmt, ast.Assign) else [stmt.target]
    out = set()
    while targets:
        t = targets.pop()
        if isinstance(t, ast.Tuple | ast.List):
            targets.extend(t.elts)
        elif isinstance(t, ast.Starred):
            targets.append(t.value)
        elif (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
              and t.value.id == "self"):
            out.add(f"self.{t.attr}")
    return out


# in-place methods that change a tensor's shape: a carrier written by one may come back
# with another shape than its original
RESHAPING = frozenset({"resize_", "resize_as_", "squeeze_", "unsqueeze_", "t_", "transpose_",
                       "swapaxes_", "swapdims_", "as_strided_", "set_"})


def keeps_shape(blocks: list[list[ast.stmt]]) -> bool:
    """No call in ``blocks`` is an in-place method that changes a shape (``RESHAPING``)."""
    return not any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                   and n.func.attr in RESHAPING for b in blocks for n in walk_local(b))


def write_back_statements(carriers: list[str], same_shape: bool = False
                          ) -> tuple[list[ast.stmt], list[ast.stmt]]:
    """Before the cond: keep each original tensor (and start its carrier from it); after
    it: write the carried values into it. ``same_shape``: each carrier has its original's
    shape by construction (a copy written in place by methods that keep shapes), which
    ``write_into`` states for a trace that gave the cond's output fresh sizes."""
    before, after = [], []
    for c in carriers:
        n = original_of(c)
        before.append(ast.Assign([name(f"__stitch_orig_{n}", True)], name(n)))
        if c != n:
            before.append(ast.Assign([name(c, True)], name(n)))
        after.append(ast.Assign([name(c, True)], rt_call(
            "write_into", name(f"__stitch_orig_{n}"), name(c),
            *([ast.Constant(True)] if same_shape else []))))
    return before, after
