"""Helpers a scalar read is passed to keep Python's number rules inside them.

``number_ops`` routes the operators on reads in the function it rewrites. A read passed to
a helper (``third(k)``, ``self.scale(k)``) would reach the helper's operators as the 0-d
tensor it is in the program: ``k / 3`` there would be float32 (2.3333332538604736 where the
model has 2.3333333333333335, inside verification's tolerance: a silent difference), ``10 //
k`` at 0 torch's ``RuntimeError``. Such a helper, found by name in the source, is rewritten by
``number_ops`` too, with the parameters the reads reach seeded as reads, and installed
while exporting as every rewritten function is (``helper_rewrites.py``). Its other callers
are unaffected: which operands are numbers is decided when it runs, by a read's mark. The
call's result counts as a read in the caller: an operator on it is routed, and a tensor it
returns keeps the tensor's rules there. A function that makes a read and returns it is
the other direction (``returned_reads.py``).

Found: a module-level function the module's globals bind to that name or a module they
bind holds (``utils.scale(k)``), ``Model.name`` of a class they bind, and ``self.name``
where the method's class (by the rewritten function's qualname) or a base defines
``name`` as a plain function or a staticmethod, and each subclass's override (the
instance may be a subclass; up to ``MAX_OVERRIDES``, else the class's own only). Not followed (the helper keeps tensor rules, as before): a function of
torch, the standard library, stitch (not its demo model), numpy or scipy, or made by exec; a
nested function or lambda, a generator or coroutine, a decorated function (a wrapper), a
callable object, a classmethod; a function another rewrite already covers (a break site's
function, a helper with side effects or in-place writes: their own passes handle them);
helpers more than ``MAX_DEPTH`` calls deep; a read passed as ``*args`` or ``**kwargs``.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import os
import types
from collections.abc import Callable
from dataclasses import dataclass, replace

from capture.source import is_user_file

from ..analysis.names import walk_local
from .functions import Target

MAX_DEPTH = 3
# a method subclasses override in more versions than this is followed in its class only
MAX_OVERRIDES = 8
# array libraries: a read that reaches their Python functions is theirs to convert
_LIBRARIES = tuple(os.path.realpath(os.path.dirname(spec.origin)) + os.sep
                   for spec in map(importlib.util.find_spec, ("numpy", "scipy"))
                   if spec is not None and spec.origin)
_NOT_PLAIN = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


@dataclass
class HelperCall:
    """A helper a read reaches: its target, the parameters reads reach, how deep."""
    target: Target
    params: frozenset[str]
    depth: int = 1
    via: str = ""  # a caller of a function returning a read: that function (returned_reads)
    lines: frozenset[int] = frozenset()  # where the call chain passed through its calls


def merge(into: dict[tuple[str, int], HelperCall], call: HelperCall) -> None:
    """Add ``call`` to ``into`` (by its target's key), with the parameters an earlier call
    of the same helper reached too."""
    known = into.get(call.target.key)
    into[call.target.key] = call if known is None else \
        replace(call, params=call.params | known.params, lines=call.lines | known.lines,
                depth=min(call.depth, known.depth))


def helper_calls(func: ast.FunctionDef, module: types.ModuleType | None, qualname: str,
                 from_read: Callable[[ast.expr], bool], skip: frozenset[str],
                 depth: int = 1) -> dict[int, list[HelperCall]]:
    """``id(call) -> [HelperCall]`` (several where a subclass overrides the method) for each call in ``func`` (not its nested functions) of a
    helper found by name, with an argument ``from_read`` says comes from a read. ``skip``:
    names whose own passes handle them (helpers with effects or writes)."""
    if module is None or depth > MAX_DEPTH:
        return {}
    owner_class = _class_of(module, qualname)
    found: dict[int, list[HelperCall]] = {}
    for node in walk_local(func.body):
        if not isinstance(node, ast.Call) or any(isinstance(a, ast.Starred)
                                                 for a in node.args):
            continue
        if any(k.arg is None for k in node.keywords):
            continue
        for target, offset in _resolve(node.func, module, owner_class, skip):
            params = _reached(target.base, node, offset, from_read)
            if params:
                found.setdefault(id(node), []).append(HelperCall(target, params, depth))
    return found


def calls_to(func: ast.FunctionDef, module: types.ModuleType | None, qualname: str,
             keys: frozenset[tuple[str, int]], lines: frozenset[int] = frozenset()
             ) -> frozenset[int]:
    """ids of the calls in ``func`` (not its nested functions) of a function found by name,
    as ``helper_calls`` finds them, whose target key is in ``keys`` (functions that return
    a read: ``returned_reads.py``); and, on ``lines`` (where a break's call chain went from
    this function into one of them), the calls not found by name that go through ``self``
    or a local name (``self.counter(x)``: a submodule, ``layer(x)``). Counting a call's
    result as a read only routes its operators: the runtime decides by the value's mark."""
    if module is None or not keys:
        return frozenset()
    owner_class = _class_of(module, qualname)
    found = set()
    for node in walk_local(func.body):
        if not isinstance(node, ast.Call) or getattr(node, "lineno", None) is None:
            continue  # a runtime call an earlier pass made
        if any(t.key in keys for t, _ in _resolve(node.func, module, owner_class, frozenset())):
            found.add(id(node))
        elif any(node.lineno <= line <= (node.end_lineno or node.lineno) for line in lines) \
                and _through_local(node.func, module):
            found.add(id(node))  # found by name too, as another class's method perhaps
    return frozenset(found)


def _through_local(func: ast.expr, module: types.ModuleType) -> bool:
    """``self.a.b``, ``self.layers[i]``, ``layer``: rooted at ``self`` or at a name that is
    neither a global of the module nor a builtin."""
    import builtins

    while isinstance(func, ast.Attribute | ast.Subscript):
        func = func.value
    return isinstance(func, ast.Name) and (
        func.id == "self" or func.id not in vars(module) and not hasattr(builtins, func.id))


def _class_of(module: types.ModuleType, qualname: str) -> type | None:
    parts = qualname.split(".")[:-1]
    if not parts or "<locals>" in parts:
        return None
    owner: object = module
    for part in parts:
        owner = getattr(owner, part, None)
    return owner if isinstance(owner, type) else None


def _resolve(func: ast.expr, module: types.ModuleType, owner_class: type | None,
             skip: frozenset[str]) -> list[tuple[Target, int]]:
    """The helpers ``func`` may name, each with how many leading parameters the call does
    not pass (``self`` of a method): a module's function, ``Class.name`` of a class the
    module binds, ``self.name`` by the method's class and every subclass overriding it (the
    instance may be one)."""
    if isinstance(func, ast.Name):
        if func.id in skip:
            return []
        raw = vars(module).get(func.id)
        return _found(helper_target(raw, raw, module, func.id), 0)
    if not isinstance(func, ast.Attribute) or not isinstance(func.value, ast.Name):
        return []
    bound = vars(module).get(func.value.id)
    if isinstance(bound, types.ModuleType):  # ``utils.scale(k)``: a module's function
        raw = vars(bound).get(func.attr)
        return _found(helper_target(raw, raw, bound, func.attr), 0)
    if isinstance(bound, type) and func.attr not in skip:
        found = _method(bound, func.attr)  # ``Model.scale(k)``, ``Model.scale(self, k)``
        return [] if found is None else [(found[0], 0)]
    if func.value.id == "self" and owner_class is not None and func.attr not in skip:
        out: dict[tuple[str, int], tuple[Target, int]] = {}
        for cls in (owner_class, *_subclasses(owner_class)):
            found = _method(cls, func.attr)
            if found is not None:
                out.setdefault(found[0].key, found)
        if len(out) > MAX_OVERRIDES:  # a base class of a library's many models: its own
            own = _method(owner_class, func.attr)
            return [] if own is None else [own]
        return list(out.values())
    return []


def _found(target: Target | None, offset: int) -> list[tuple[Target, int]]:
    return [] if target is None else [(target, offset)]


def _method(cls: type, attr: str) -> tuple[Target, int] | None:
    """``cls``'s ``attr`` through its MRO: a plain function (called bound: ``self`` not
    passed) or a staticmethod; None for anything else."""
    for owner in cls.__mro__:
        if attr in vars(owner):
            raw = vars(owner)[attr]
            base = raw.__func__ if isinstance(raw, staticmethod) else raw
            target = helper_target(base, raw, owner, attr)
            return None if target is None else (target, 0 if isinstance(raw, staticmethod)
                                                else 1)
    return None


def _subclasses(cls: type) -> list[type]:
    out, stack = [], list(cls.__subclasses__())
    while stack:
        sub = stack.pop()
        if sub not in out:
            out.append(sub)
            stack.extend(sub.__subclasses__())
    return out


def helper_target(base: object, raw: object, owner: object, attr: str) -> Target | None:
    if type(base) is not types.FunctionType or "<locals>" in base.__qualname__ \
            or base.__name__ == "<lambda>" or hasattr(base, "__wrapped__"):
        return None
    code = base.__code__
    if code.co_flags & _NOT_PLAIN or code.co_filename.startswith("<") \
            or not is_user_file(code.co_filename) \
            or os.path.realpath(code.co_filename).startswith(_LIBRARIES):
        return None
    return Target((code.co_filename, code.co_firstlineno), base.__qualname__, base, owner,
                  attr, raw)


def _reached(base: types.FunctionType, call: ast.Call, offset: int,
             from_read: Callable[[ast.expr], bool]) -> frozenset[str]:
    """The helper's parameters the call's read arguments reach (positions past the last
    positional parameter reach ``*args``; unknown keywords ``**kwargs``)."""
    try:
        params = list(inspect.signature(base).parameters.values())
    except (TypeError, ValueError):
        return frozenset()
    params = params[offset:]
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    star = next((p.name for p in params if p.kind == p.VAR_POSITIONAL), None)
    stars = next((p.name for p in params if p.kind == p.VAR_KEYWORD), None)
    named = {p.name for p in params if p.kind != p.POSITIONAL_ONLY}
    reached: set[str] = set()
    for i, arg in enumerate(call.args):
        if from_read(arg):
            name = positional[i].name if i < len(positional) else star
            if name is not None:
                reached.add(name)
    for keyword in call.keywords:
        if from_read(keyword.value):
            name = keyword.arg if keyword.arg in named else stars
            if name is not None:
                reached.add(name)
    return frozenset(reached)
