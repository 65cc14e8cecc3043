"""Keywords of a rewritten branch's ``cond`` call that tell the runtime what its arms hold
(``operators/rt_control.py``)."""

from __future__ import annotations

import ast

from ..analysis.names import is_rt_call, path_to, walk_local
from ..analysis.none_values import may_give_none


def with_reads(call: ast.Call, reads: list[str]) -> None:
    """``reads=N``: the last N operands are names the arms only read."""
    if reads:
        call.keywords.append(ast.keyword("reads", ast.Constant(len(reads))))


def mark_nesting(call: ast.Call, arms: list[ast.stmt]) -> None:
    """``nests=True`` on a cond whose arms hold another (already rewritten, inner first):
    there an arm may give an int that is symbolic when traced (the inner cond's output)
    where the other gives a constant, so every number must travel as a tensor."""
    if any(is_rt_call(c, "cond", "cond_effects") for a in arms for c in ast.walk(a)):
        call.keywords.append(ast.keyword("nests", ast.Constant(True)))


def mark_structures(call: ast.Call, node: ast.If, outputs: bool = False) -> None:
    """``optional=True`` where an arm may give None, so the arms' output structures may
    differ (``rt_union.py``); ``outputs=True`` where what the arms give may be carried to
    the program's outputs (its function's return values are the program's: the one
    torch.compile entered, or one every caller returns as it is or passes its rest to,
    ``caller_frames.returns_to_entry``; and ``carried_to_outputs``), the one place such a
    value can be carried."""
    if may_give_none(node.body + node.orelse):
        call.keywords.append(ast.keyword("optional", ast.Constant(True)))
    if outputs:
        call.keywords.append(ast.keyword("outputs", ast.Constant(True)))


def carried_to_outputs(func: ast.FunctionDef, anchor: ast.stmt, names: list[str],
                       branch: ast.stmt | None = None) -> bool:
    """Whether the names the branch at ``anchor`` (a branch that does not return) assigns
    may come out of it in two structures, in a function whose return values are the
    program's (``to_outputs``): where they reach the return as they are (the branch in the
    function's own body, the names read after it only as items of the returned value:
    ``return h``, ``return h, aux``, ``return {"h": h}``, never rebound); or where the
    branch sits in a loop, a ``try`` or a ``with``, whose rest no arm can take
    (``continuation.py``), so that carrying is the one way left: a later use of such a value
    refuses with its line. Elsewhere the rest of the function goes into each arm instead.
    Not for a container the arms fill (``out["pos"] = x``): an arm's trace may not change
    what it was handed."""
    path = path_to(func.body, anchor)
    if path is None or _filled(branch or anchor, set(names)):
        return False
    if any(not isinstance(block[i], ast.If) for block, i in path[:-1]):
        return True
    if len(path) != 1:
        return False
    return not used_beyond_return(func.body[path[0][1] + 1:], set(names))


def used_beyond_return(rest: list[ast.stmt], names: set[str]) -> bool:
    """``rest`` names one of ``names`` (reads or rebinds it, nested functions included)
    other than as an item of a value it returns at its top level (``return h``, ``return
    h, aux``, ``return {"h": h}``: the program's outputs carry those as they are)."""
    allowed: set[int] = set()
    for stmt in rest:
        if isinstance(stmt, ast.Return) and stmt.value is not None:
            allowed |= {id(n) for n in _items(stmt.value)}
    return any(isinstance(n, ast.Name) and n.id in names and id(n) not in allowed
               for stmt in rest for n in ast.walk(stmt))


def _filled(branch: ast.stmt, names: set[str]) -> bool:
    """An arm stores into an item or attribute of one of ``names``."""
    return any(isinstance(n, ast.Subscript | ast.Attribute) and isinstance(n.ctx, ast.Store)
               and isinstance(n.value, ast.Name) and n.value.id in names
               for n in ast.walk(branch))


def _items(value: ast.expr) -> list[ast.Name]:
    """The names a returned display holds as its items, at any depth of displays."""
    if isinstance(value, ast.Name):
        return [value]
    if isinstance(value, ast.Tuple | ast.List):
        return [n for item in value.elts for n in _items(item)]
    if isinstance(value, ast.Dict):
        return [n for item in value.values for n in _items(item)]
    return []


def mark_raising(node: ast.If, ctx, call: ast.Call) -> str:
    """For a branch an arm of which holds a ``raise``: torch.cond cannot trace that arm.
    While exporting, an arm that raises wherever it is taken becomes a check
    (operators/rt_raising.py), decided there; under torch.compile (the census) the branch
    runs as Python (``raises``), so a break in its span is expected. What to add to the
    decision's reason."""
    if not any(isinstance(n, ast.Raise) for n in walk_local(node.body + node.orelse)):
        return ""
    call.keywords.append(ast.keyword("raises", ast.Constant(True)))
    ctx.deferred_lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return ("; an arm holds a raise: where it raises wherever it is taken, the branch is "
            "a check and the other arm (decided while exporting)")
