"""Writes into a local container nothing ever reads are dead: each keeps only the evaluation
of what it stores::

    steps = []                              steps = []
    while not done.all() and k < 5:        while not done.all() and k < 5:
        nxt = self.out(h).argmax(-1)   ->       nxt = self.out(h).argmax(-1)
        steps.append(nxt)                       # (nothing: `nxt` is a name)
        ...                                     ...

A loop or branch that grows a list nobody reads (a decode loop keeping its tokens "for
later", a debug dict) would otherwise carry the container into ``torch.while_loop`` or
``torch.cond``, whose bodies may not change an object made outside them. Liveness decides,
not the spelling: the name is the function's own (``container_writes.fresh_containers``:
bound only to new lists or dicts, no other store, no nested function or lambda refers to
it), and every read of it is the receiver of a covered write, so after any write nothing
can observe the container's contents. Covered: ``l.append(v)`` (one positional argument,
which cannot raise) and ``d[k] = v`` with a constant key (hashing it cannot raise). The
stored value is still evaluated, in place, for anything it calls, unless it is a name, a
constant or a method of a name that can neither raise nor change anything (``h.sum()``):
then the write leaves nothing. A function that calls ``locals()``, ``vars()``, ``eval``
or ``exec`` is left as written.
"""

from __future__ import annotations

import ast

from ..analysis.context import RewriteContext
from ..analysis.names import walk_local
from .container_writes import fresh_containers

_INTROSPECTION = frozenset({"locals", "vars", "eval", "exec"})


def dead_writes(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    if any(isinstance(n, ast.Name) and n.id in _INTROSPECTION for n in ast.walk(func)):
        return
    kinds = fresh_containers(func)
    dead = set(kinds)
    if not dead:
        return
    writes: dict[int, str] = {}
    for stmt in walk_local(func.body):
        target = _written(stmt, kinds) if isinstance(stmt, ast.stmt) else None
        if target is not None and target[0] in dead:
            writes[id(target[1])] = target[0]
    for node in walk_local(func.body):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) \
                and node.id in dead and writes.get(id(node)) != node.id:
            dead.discard(node.id)  # read for anything but a covered write: live
    if dead:
        _drop(func.body, {n: kinds[n] for n in dead})


def _written(stmt: ast.stmt, kinds: dict[str, str]) -> tuple[str, ast.Name] | None:
    """(name, the Name node read as the receiver) of a covered write into a container of
    the kind it applies to (``kinds``: name -> "list" | "dict"), else None."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        call = stmt.value
        recv = call.func.value if isinstance(call.func, ast.Attribute) else None
        if isinstance(recv, ast.Name) and kinds.get(recv.id) == "list" \
                and call.func.attr == "append" \
                and len(call.args) == 1 and not call.keywords \
                and not isinstance(call.args[0], ast.Starred):
            return recv.id, recv
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
            and isinstance(stmt.targets[0], ast.Subscript):
        target = stmt.targets[0]
        if isinstance(target.value, ast.Name) and kinds.get(target.value.id) == "dict" \
                and isinstance(target.slice, ast.Constant):
            return target.value.id, target.value
    return None


def _stored(stmt: ast.stmt) -> ast.expr:
    return stmt.value.args[0] if isinstance(stmt, ast.Expr) else stmt.value


# tensor methods that neither raise (on any shape, empty included) nor change anything:
# a dropped write of ``h.sum()`` leaves nothing behind (an expression left in an arm would
# keep the branch from being a value-free check: ``if t: h.sum(); raise ...``)
_QUIET = frozenset({"sum", "mean", "clone", "detach", "float", "abs", "neg", "exp", "relu",
                    "sigmoid", "tanh", "norm"})


def _inert(value: ast.expr) -> bool:
    """``value`` is a name, a constant, or a quiet method of a name with no arguments."""
    if isinstance(value, ast.Name | ast.Constant):
        return True
    return (isinstance(value, ast.Call) and not value.args and not value.keywords
            and isinstance(value.func, ast.Attribute) and value.func.attr in _QUIET
            and isinstance(value.func.value, ast.Name))


def _drop(block: list[ast.stmt], dead: dict[str, str]) -> None:
    """``block`` and the blocks inside it, in place, without the dead writes: each keeps the
    evaluation of its value, or nothing where the value is inert (a block left empty holds
    ``pass``)."""
    kept: list[ast.stmt] = []
    for stmt in block:
        if _written(stmt, dead) is not None:
            value = _stored(stmt)
            if not _inert(value):
                kept.append(ast.copy_location(ast.Expr(value), stmt))
            continue
        if not isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            for inner in _blocks_of(stmt):
                _drop(inner, dead)
        kept.append(stmt)
    block[:] = kept or [ast.copy_location(ast.Pass(), block[0])]


def _blocks_of(stmt: ast.stmt) -> list[list[ast.stmt]]:
    """The statement lists directly inside ``stmt``: bodies, ``else``s, ``finally``s,
    ``except`` handlers' and ``match`` cases' bodies."""
    out = [getattr(stmt, f) for f in ("body", "orelse", "finalbody")
           if isinstance(getattr(stmt, f, None), list) and getattr(stmt, f)
           and isinstance(getattr(stmt, f)[0], ast.stmt)]
    out += [h.body for h in getattr(stmt, "handlers", [])]
    out += [c.body for c in getattr(stmt, "cases", [])]
    return out
