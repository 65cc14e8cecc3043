"""Attributes a branch assigns (buffers, ``self.x = ...``), carried through the cond::

    if p:                           def __stitch_true_1(__stitch_attr_steps):
        self.steps += 1      ->         __stitch_attr_steps = __stitch_attr_steps + 1
                                    ... cond(...) ...; write_back(self, "steps", v, True)

plus the rewrites that make a branch body traceable by torch.cond (no in-place updates of
its inputs, ``register_buffer`` as an assignment, inner write-backs lifted out).
"""

from __future__ import annotations

import ast

from ..analysis.names import SCOPES, is_rt_call, name, walk_local


def self_attributes(stmts) -> list[str]:
    out = []
    for node in walk_local(stmts):
        if (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name) and node.value.id == "self"):
            out.append(node.attr)
    return list(dict.fromkeys(out))


def lift_write_backs(block: list[ast.stmt]) -> set[str]:
    """An if nested in this branch, already a cond, writes attributes back after it
    (``write_back(self, "a", v, inplace)``); inside this branch (traced by torch.cond, which
    forbids mutation) that becomes ``self.a = v`` again, so this cond carries ``a`` out and
    writes it back itself. Returns the attributes the inner writes updated in place."""
    inplace: set[str] = set()
    for i, stmt in enumerate(block):
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if (is_rt_call(call, "write_back")
                and isinstance(call.args[0], ast.Name) and call.args[0].id == "self"):
            attr, value, in_place = call.args[1].value, call.args[2], call.args[3].value
            target = ast.Attribute(name("self"), attr, ast.Store())
            block[i] = ast.copy_location(ast.Assign(targets=[target], value=value), stmt)
            if in_place:
                inplace.add(attr)
        for field_name in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(stmt, field_name, None)
            if isinstance(inner, list) and not isinstance(stmt, SCOPES):
                inplace |= lift_write_backs(inner)
    return inplace


def register_buffer_as_assignment(stmts) -> None:
    """``self.register_buffer("x", v, ...)`` in a branch -> ``self.x = v`` (the buffer exists;
    assignment rebinds it the same way, and can be carried out of a cond)."""
    for node in list(walk_local(stmts)):
        for field_name in ("body", "orelse"):
            block = node if isinstance(node, list) else getattr(node, field_name, None)
            if isinstance(block, list):
                _rewrite_register(block)
    _rewrite_register(stmts)


def _rewrite_register(block: list) -> None:
    for i, stmt in enumerate(block):
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and call.func.attr == "register_buffer"
                and isinstance(call.func.value, ast.Name) and call.func.value.id == "self"
                and len(call.args) >= 2 and isinstance(call.args[0], ast.Constant)):
            target = ast.Attribute(name("self"), call.args[0].value, ast.Store())
            block[i] = ast.copy_location(ast.Assign(targets=[target], value=call.args[1]), stmt)


def localize_attributes(stmts, attrs: list[str]) -> None:
    """``self.steps`` -> ``__stitch_attr_steps`` (loads and stores) inside the arms."""
    for node in walk_local(stmts):
        for field_name, value in ast.iter_fields(node):
            items = value if isinstance(value, list) else [value]
            for i, item in enumerate(items):
                if (isinstance(item, ast.Attribute) and isinstance(item.value, ast.Name)
                        and item.value.id == "self" and item.attr in attrs):
                    replacement = ast.copy_location(name(f"__stitch_attr_{item.attr}",
                                                         isinstance(item.ctx, ast.Store)), item)
                    if isinstance(value, list):
                        value[i] = replacement
                    else:
                        setattr(node, field_name, replacement)


def out_of_place(stmts) -> None:
    """``self.a += y`` (localised: ``__stitch_attr_a += y``) -> ``__stitch_attr_a =
    __stitch_attr_a + y`` in branches: torch.cond forbids mutating its inputs (the
    attribute carrying writes the result back in place). Names are written on the arm's
    own copy instead (``branch_inplace``)."""
    blocks = [stmts] + [getattr(n, f) for n in list(walk_local(stmts)) for f in ("body", "orelse")
                        if isinstance(getattr(n, f, None), list)]
    for block in blocks:
        for i, stmt in enumerate(block):
            if (isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name)
                    and stmt.target.id.startswith("__stitch_attr_")):
                load = ast.Name(stmt.target.id, ast.Load())
                block[i] = ast.copy_location(ast.Assign(
                    targets=[ast.Name(stmt.target.id, ast.Store())],
                    value=ast.BinOp(load, stmt.op, stmt.value)), stmt)
