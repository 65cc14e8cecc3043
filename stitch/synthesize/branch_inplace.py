"""In-place tensor writes in a branch, as values the cond carries out::

    if p:                                  __stitch_orig_out = out
        out.index_add_(0, idx, v)    ->    def __stitch_true_1(out):
        self.buf[i] = 0                        out = __stitch_rt__.in_place(out, "index_add_", 0, idx, v)
                                               __stitch_attr_buf = __stitch_rt__.set_item(...)
                                           ... (out, ...) = cond(...)
                                           out = __stitch_rt__.write_into(__stitch_orig_out, out)

torch.cond forbids a branch to write its operands; the branch works on a copy instead, the
cond returns it, and the original tensor is then written with the result (``copy_``): the
same object holds the same values as after the eager in-place write, so every alias of it
(a view, a buffer, a caller's input) sees the change. Attributes of ``self`` written in place
become assignments that the attribute carrying already writes back in place.

Covered: expression statements ``x.op_(...)`` (any method named with one trailing
underscore) and ``x[i] = v`` / ``x[i] op= v`` where ``x`` is a name bound before the ``if``
or ``self.<attr>``. A name both rebound and written in place in the arms is refused (the
write-back could not tell which object the eager write reached).
"""

from __future__ import annotations

import ast

from .context import RewriteRefused
from .names import RT_NAME, SCOPES, name, rt_call, statement_blocks, walk_local


def _in_place_method(node: ast.stmt) -> tuple[ast.expr, ast.Call] | None:
    call = node.value if isinstance(node, ast.Expr) else None
    if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            and call.func.attr.endswith("_") and not call.func.attr.startswith("_")
            and not call.func.attr.endswith("__")):
        return call.func.value, call
    return None


def _receiver(expr: ast.expr, bound: set[str]) -> str | None:
    """The carried name of a receiver: ``x`` (bound before the if) or ``self.a`` -> ``self.a``."""
    if isinstance(expr, ast.Name) and expr.id in bound:
        return expr.id
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


def _rewrite(stmt: ast.stmt, bound: set[str], skip: set[str]) -> tuple[ast.stmt, str] | None:
    found = _in_place_method(stmt)
    if found is not None:
        receiver, call = found
        key = _receiver(receiver, bound)
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
            current = ast.Subscript(_load(target.value) if _receiver(target.value, bound)
                                    else target.value, target.slice, ast.Load())
            value = ast.BinOp(current, stmt.op, stmt.value)
    if not isinstance(target, ast.Subscript):
        return None
    key = _receiver(target.value, bound)
    if key is None or key in skip:
        return None
    new = rt_call("set_item", _load(target.value), _as_value(target.slice), value)
    return ast.copy_location(ast.Assign([_store(target.value)], new), stmt), key


def _blocks(arms: list[list[ast.stmt]]):
    for arm in arms:
        yield from statement_blocks(arm)


def _rt_call_of(node: ast.AST, *names: str) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in names and isinstance(node.func.value, ast.Name)
            and node.func.value.id == RT_NAME)


def _plain_stores(arms: list[list[ast.stmt]], lifted: set[str]) -> set[str]:
    """Names and ``self.`` attributes the arms rebind; an inner cond's result does not count
    for a name that cond wrote in place (lifted: it is written back here instead)."""
    nodes = list(walk_local([s for arm in arms for s in arm]))
    skip = {id(n) for a in nodes
            if isinstance(a, ast.Assign) and _rt_call_of(a.value, "cond", "cond_effects")
            for t in a.targets for n in ast.walk(t)
            if isinstance(n, ast.Name) and n.id in lifted}
    out = set()
    for node in nodes:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) \
                and id(node) not in skip:
            out.add(node.id)
        elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
              and isinstance(node.value, ast.Name) and node.value.id == "self"):
            out.add(f"self.{node.attr}")
    return out


def _lift_inner_write_backs(arms: list[list[ast.stmt]]) -> set[str]:
    """An if nested in these arms, already a cond, wrote names back after it
    (``x = write_into(__stitch_orig_x, x)``); inside this branch (traced by torch.cond, which
    forbids writing operands) that is dropped, and this cond writes ``x`` back itself."""
    lifted = set()
    for block in list(_blocks(arms)):
        for i, stmt in enumerate(block):
            if isinstance(stmt, ast.Assign) and _rt_call_of(stmt.value, "write_into"):
                lifted.add(stmt.targets[0].id)
                block[i] = ast.copy_location(ast.Pass(), stmt)
    return lifted


def in_place_as_assignment(arms: list[list[ast.stmt]],
                           bound: set[str]) -> tuple[list[str], set[str]]:
    """Rewrite the in-place writes in ``arms`` (in place). Returns the names written in place
    (bound before the ``if``: written back after the cond with ``write_into``) and the
    attributes of ``self`` written in place (carried and written back in place).

    A write after the arm rebound the name at its top level reaches the arm's own new tensor
    (torch.cond allows writing those): it is left as written."""
    lifted = _lift_inner_write_backs(arms)
    rebound = _plain_stores(arms, lifted)
    written: dict[str, None] = dict.fromkeys(n for n in sorted(lifted) if n in bound)
    for arm in arms:
        fresh: set[str] = set()  # rebound earlier in this arm, at its top level
        for j, top in enumerate(arm):
            done = _rewrite(top, bound, fresh)
            if done is not None:
                arm[j], key = done
                written[key] = None
                continue
            for block in _inner_blocks(top):
                for i, stmt in enumerate(block):
                    inner = _rewrite(stmt, bound, fresh)
                    if inner is not None:
                        block[i], key = inner
                        written[key] = None
            fresh |= _direct_stores(top)
    both = sorted(k for k in written if k in rebound)
    if both:
        raise RewriteRefused(f"`{both[0]}` is both rebound and written in place in the "
                             "branches; which object the in-place write reaches depends on "
                             "the order, so the write-back cannot be exact")
    names = [k for k in written if not k.startswith("self.")]
    attrs = {k.split(".", 1)[1] for k in written if k.startswith("self.")}
    return names, attrs


def _inner_blocks(stmt: ast.stmt):
    if isinstance(stmt, SCOPES):
        return
    for field_name in ("body", "orelse", "finalbody"):
        block = getattr(stmt, field_name, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            yield from statement_blocks(block)


def _direct_stores(stmt: ast.stmt) -> set[str]:
    """Names (and ``self.`` attributes) a plain assignment statement binds."""
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
        elif isinstance(t, ast.Name):
            out.add(t.id)
        elif (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
              and t.value.id == "self"):
            out.add(f"self.{t.attr}")
    return out


def write_back_statements(names: list[str]) -> tuple[list[ast.stmt], list[ast.stmt]]:
    """Before the cond: keep each original tensor; after it: write the result into it."""
    before = [ast.Assign([name(f"__stitch_orig_{n}", True)], name(n)) for n in names]
    after = [ast.Assign([name(n, True)], rt_call("write_into", name(f"__stitch_orig_{n}"),
                                                 name(n))) for n in names]
    return before, after
