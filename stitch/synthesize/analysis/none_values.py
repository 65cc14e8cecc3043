"""Whether a branch's arms may give a value ``None`` (static, from their source).

An arm that assigns or returns ``None`` (also inside a tuple, list or dict it builds) may
give an output a structure the other arm does not: torch.cond cannot take that, and the
census's ``torch.compile`` would fail on it outright. Such a branch runs as Python under
the census and is carried as ``Alternatives`` when exported (operators/rt_union.py).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from .names import walk_local


def _holds_none(value: ast.AST | None) -> bool:
    if value is None:  # a bare ``return``
        return True
    if isinstance(value, ast.Constant):
        return value.value is None
    if isinstance(value, ast.Tuple | ast.List):
        return any(_holds_none(v) for v in value.elts)
    if isinstance(value, ast.Dict):
        return any(_holds_none(v) for v in value.values)
    return False


def may_give_none(stmts: Iterable[ast.stmt]) -> bool:
    """An assignment or ``return`` in ``stmts`` (not in nested functions) gives ``None``."""
    for node in walk_local(stmts):
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None \
                and _holds_none(node.value):
            return True
        if isinstance(node, ast.Return) and _holds_none(node.value):
            return True
    return False
