"""Which statements set Python state outside the graph, and reading a set value back: the
pieces the branch-state rewrites (``branch_state``, ``carried_state``) share."""

from __future__ import annotations

import ast

from ..analysis.names import name, walk_local

# displays a cond cannot carry as a model attribute (``self.x = h`` is carried as a tensor)
DISPLAYS = (ast.List, ast.Tuple, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)


def outside_target(stmt: ast.stmt, local: set[str]) -> ast.Attribute | None:
    """The attribute ``stmt`` sets when it is state outside the graph: ``type(self).x``,
    ``Name.x`` for a name the function does not bind (a class, a module), or ``self.x`` set
    to a container."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Attribute)):
        return None
    target = stmt.targets[0]
    owner = target.value
    if outside_owner(owner):
        return target
    if isinstance(owner, ast.Name) and owner.id == "self":
        return target if isinstance(stmt.value, DISPLAYS) else None
    if isinstance(owner, ast.Name) and owner.id not in local:
        return target
    return None


def outside_owner(owner: ast.expr) -> bool:
    """``type(self)``, or the module whose globals a branch sets (``_GlobalsAsAttributes``)."""
    return (isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name)
            and owner.func.id == "type") or is_module(owner)


MODULE = "__stitch_module__"  # the rewritten function's module (synthesize/convert/functions.py)


def module_owner() -> ast.expr:
    """The module whose global a branch sets: ``global X; X = v`` is ``module.X = v``."""
    return name(MODULE)


def is_module(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == MODULE


def read_local(stmts: list[ast.stmt], owner: str, attr: str, value: str) -> None:
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
