"""Helpers with side effects that a forward calls by name, for ``branch_effects``.

    def _recorder():
        kept = []
        def record(value):
            kept.append(value)         # a list in record's closure
        return record
    record = _recorder()

    if h.mean() > 0:                   inside torch.cond, Dynamo cannot make the append
        record(h.min())                (a side effect): the branch would be refused

A statement-level call, in a data-dependent branch, to such a helper is logged like a print
(its arguments as they are at the call) and the helper itself is called by the epilogue,
after the graph, when its branch ran. The helper is found by what the forward's name
resolves to (a module global or a closure cell of the forward), and kept when it is a plain
Python function in user code whose body makes a print/log/warn call or appends to a list
that outlives it, or calls another such helper (three levels deep).
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
import types

from capture.source import is_user_file, warn_aliases

from .branch_effects import bound_names, effect_calls

DEPTH = 3


def effect_helpers(fn: types.FunctionType) -> frozenset[str]:
    """Names ``fn`` reads (globals, closure variables) that resolve to helpers with side
    effects."""
    return frozenset(name for name, obj in _reachable(fn).items() if _has_effects(obj, DEPTH))


def _reachable(fn: types.FunctionType) -> dict[str, object]:
    """What each name ``fn`` reads as a global or a closure variable is bound to now."""
    found = {}
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=False))
    for name in _names(fn.__code__):
        if name in cells:
            try:
                found[name] = cells[name].cell_contents
            except ValueError:  # an empty cell
                continue
        elif name in fn.__globals__:
            found[name] = fn.__globals__[name]
    return found


def _names(code: types.CodeType) -> set[str]:
    """Global and free names read by ``code`` and the code objects nested in it."""
    out = set(code.co_names) | set(code.co_freevars)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            out |= _names(const)
    return out


def _has_effects(obj: object, depth: int) -> bool:
    if depth == 0 or not isinstance(obj, types.FunctionType) \
            or not is_user_file(obj.__code__.co_filename):
        return False
    func = _definition(obj)
    if func is None:
        return False
    if effect_calls(func.body, warn_aliases(obj.__code__.co_filename), bound_names(func)):
        return True
    reachable = _reachable(obj)
    return any(_has_effects(reachable[c.func.id], depth - 1)
               for c in ast.walk(func) if isinstance(c, ast.Call)
               and isinstance(c.func, ast.Name) and c.func.id in reachable)


@functools.lru_cache(maxsize=4096)  # read, never changed: shared by both analyses
def _definition(fn: types.FunctionType) -> ast.FunctionDef | None:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return None
    func = tree.body[0] if tree.body else None
    return func if isinstance(func, ast.FunctionDef) else None


def writing_helpers(fn: types.FunctionType) -> dict[str, tuple[tuple[int | None, str], ...]]:
    """Names ``fn`` reads that resolve to user helpers writing some of their parameters in
    place (``a.mul_(b)``, ``a[i] = v``, or passing it on to such a helper), with those
    parameters as (position or None for keyword-only, name). A branch calling one writes
    the arguments it passes there (``branch_inplace`` carries them out of the cond)."""
    out = {}
    for name, obj in _reachable(fn).items():
        written = _written_params(obj, DEPTH)
        if written:
            out[name] = written
    return out


def _root(expr: ast.expr) -> str | None:
    while isinstance(expr, ast.Subscript):
        expr = expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def _written_params(obj: object, depth: int) -> tuple[tuple[int | None, str], ...]:
    if depth == 0 or not isinstance(obj, types.FunctionType) \
            or not is_user_file(obj.__code__.co_filename):
        return ()
    func = _definition(obj)
    if func is None:
        return ()
    positional = [a.arg for a in func.args.posonlyargs + func.args.args]
    params = set(positional) | {a.arg for a in func.args.kwonlyargs}
    reachable = None
    written: set[str] = set()
    for node in ast.walk(func):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr.endswith("_") and not node.func.attr.startswith("_"):
            written.add(_root(node.func.value))
        elif isinstance(node, ast.Assign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            written |= {_root(t) for t in targets if isinstance(t, ast.Subscript)}
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            reachable = _reachable(obj) if reachable is None else reachable
            for position, pname in _written_params(reachable.get(node.func.id), depth - 1):
                passed = [k.value for k in node.keywords if k.arg == pname] or (
                    [node.args[position]] if position is not None
                    and position < len(node.args) else [])
                written |= {_root(p) for p in passed}
    return tuple((positional.index(p) if p in positional else None, p)
                 for p in sorted(written & params))
