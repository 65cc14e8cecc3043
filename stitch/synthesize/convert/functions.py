"""Find the Python function behind a break site, recompile a rewritten version of it, and
install it only while exporting.

A method is found on the class of the module instance that ran the site (walking the MRO);
a decorated method (``functools.wraps`` style) is rewritten beneath its decorators: the
wrapper's closure cell that holds the original function is pointed at the rewrite. The
rewrite is compiled with the original file name and line numbers, in the original module's
globals, with the original closure cells (``__class__`` for ``super()``) plus
``__stitch_rt__`` and ``__stitch_module__`` (the module those globals belong to); a class body around it keeps private-name mangling right.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import dataclasses
import inspect
import sys
import textwrap
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from capture import BreakSite
from capture.source import module_of_file

from ...errors import SourceUnavailableError
from ..operators import runtime
from ..operators.rt_union import installing
from ..operators.shims import shimmed


@dataclass
class Target:
    """Where a function lives and how to swap it."""

    key: tuple[str, int]  # (filename, first line of the def)
    qualname: str
    base: types.FunctionType  # the undecorated function
    owner: Any  # class or module that holds the attribute
    attr: str
    raw: Any  # what owner.__dict__[attr] holds (function, staticmethod, wrapper ...)
    cell: Any = None  # closure cell of a wrapper that holds ``base`` (decorated methods)
    sites: list[BreakSite] = field(default_factory=list)
    # other module namespaces binding the same module-level function (a package that
    # re-exports it: ``torchvision.ops.batched_nms`` is ``torchvision.ops.boxes``'s); found
    # once, when first installed
    aliases: list[tuple[dict, str]] | None = None

    @property
    def filename(self) -> str:
        return self.key[0]


def find_target(site: BreakSite, model: Any) -> Target:
    """The function that contains ``site``, found through the module that ran it."""
    func_name = site.function.rsplit(".", 1)[-1]
    owners: list[Any] = []
    if isinstance(model, torch.nn.Module):
        for path in site.module_paths or ("",):
            try:
                module = model.get_submodule(path) if path else model
            except AttributeError:
                continue
            owners.extend(type(module).__mro__)
    module_obj = module_of_file(site.filename)
    if module_obj is not None:
        owners.append(module_obj)
        cls_name = site.function.rsplit(".", 1)[0] if "." in site.function else ""
        cls = getattr(module_obj, cls_name, None) if cls_name else None
        if isinstance(cls, type):
            owners.extend(cls.__mro__)
    if "<locals>" in site.function:
        try:
            return _find_nested(site, owners)
        except SourceUnavailableError:
            # a function defined inside another on each call (``def step(h): ...`` in
            # forward): the enclosing function is rewritten, the nested def with it
            outer = site.function.rsplit(".<locals>.", 1)[0]
            return find_target(dataclasses.replace(site, function=outer), model)
    for owner in owners:
        raw = vars(owner).get(func_name) if hasattr(owner, "__dict__") else None
        if raw is None:
            continue
        func = raw.__func__ if isinstance(raw, staticmethod | classmethod) else raw
        base = inspect.unwrap(func) if callable(func) else None
        code = getattr(base, "__code__", None)
        if code is None or code.co_filename != site.filename:
            continue
        lines = [ln for _, _, ln in code.co_lines() if ln is not None]
        if not lines or not (code.co_firstlineno <= site.lineno <= max(lines)):
            continue
        # a torch.compiler.disable wrapper is replaced, not seen through (undisable.py)
        disabled = bool(getattr(func, "_torchdynamo_disable", False))
        cell = None if base is func or disabled else _cell_holding(func, base)
        if base is not func and cell is None and not disabled:
            raise SourceUnavailableError(
                f"{site.location}: {site.function} is wrapped by a decorator stitch cannot "
                "see through (no closure cell holds the original function). Apply the "
                "decorator outside the model or remove it while exporting.")
        return Target((code.co_filename, code.co_firstlineno), site.function, base, owner,
                      func_name, raw, cell)
    raise SourceUnavailableError(
        f"{site.location}: could not find the function {site.function} on the module(s) "
        f"{', '.join(site.module_paths) or '<root>'} or in its source module; stitch needs "
        "the function to be a method of a module in the model or a module-level function.")


def _find_nested(site: BreakSite, owners: list[Any]) -> Target:
    """A nested function (e.g. inside a decorator) is reached through the closure cell of a
    function that calls it; swapping that cell installs the rewrite."""
    seen: set[int] = set()

    def search(fn, depth=0):
        if depth > 6 or id(fn) in seen:
            return None
        seen.add(id(fn))
        for cell in getattr(fn, "__closure__", None) or ():
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            code = getattr(value, "__code__", None)
            if code is not None and code.co_filename == site.filename \
                    and value.__qualname__ == site.function and _spans(code, site.lineno):
                return cell, value
            if callable(value):
                found = search(value, depth + 1)
                if found:
                    return found
        wrapped = getattr(fn, "__wrapped__", None)
        return search(wrapped, depth + 1) if wrapped is not None else None

    # a decorator's wrapper bound as a module's function (``in_range =
    # perform_keep_shape_image(in_range)``, renamed by ``functools.wraps``): the function
    # itself, found by its code in the module of a class of the model that calls it
    modules = [sys.modules.get(getattr(o, "__module__", "")) for o in owners
               if isinstance(o, type)]
    for owner in [*owners, *(m for m in modules if m is not None)]:
        for attr, raw in list(vars(owner).items()) if hasattr(owner, "__dict__") else []:
            if type(raw) is types.FunctionType and raw.__code__.co_qualname == site.function \
                    and raw.__code__.co_filename == site.filename \
                    and _spans(raw.__code__, site.lineno):
                code = raw.__code__
                return Target((code.co_filename, code.co_firstlineno), site.function, raw,
                              owner, attr, raw)
    for owner in owners:
        for raw in list(vars(owner).values()) if hasattr(owner, "__dict__") else []:
            func = raw.__func__ if isinstance(raw, staticmethod | classmethod) else raw
            if not callable(func):
                continue
            found = search(func)
            if found:
                cell, base = found
                code = base.__code__
                return Target((code.co_filename, code.co_firstlineno), site.function, base,
                              owner, base.__name__, raw, cell)
    raise SourceUnavailableError(
        f"{site.location}: the break is inside a nested function ({site.function}) that no "
        "method of the model reaches through a closure; stitch cannot install a rewrite of "
        "it. Move the nested function to module level or into a method.")


def _spans(code, lineno: int) -> bool:
    lines = [ln for _, _, ln in code.co_lines() if ln is not None]
    return bool(lines) and code.co_firstlineno <= lineno <= max(lines)


def _cell_holding(wrapper: Any, base: Any):
    seen = set()
    current = wrapper
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        for cell in getattr(current, "__closure__", None) or ():
            try:
                contents = cell.cell_contents
            except ValueError:
                continue
            if contents is base:
                return cell
        current = getattr(current, "__wrapped__", None)
    return None


def parse_function(target: Target) -> ast.FunctionDef:
    try:
        # by its code: a function's own source, where ``inspect`` would follow a wrapper's
        # ``__wrapped__`` to the function it wraps
        lines, start = inspect.getsourcelines(getattr(target.base, "__code__", target.base))
    except (OSError, TypeError) as e:
        raise SourceUnavailableError(
            f"{target.filename}: no source for {target.qualname} ({e}); stitch rewrites "
            "Python source. Functions made by exec/lambda or C extensions cannot be rewritten."
        ) from None
    tree = ast.parse(textwrap.dedent("".join(lines)))
    func = tree.body[0]
    if not isinstance(func, ast.FunctionDef):
        raise SourceUnavailableError(f"{target.filename}:{start}: {target.qualname} is not a "
                                     "plain `def` (async or lambda); it cannot be rewritten")
    ast.increment_lineno(tree, start - 1)
    func.decorator_list = []
    return func


def compile_function(target: Target, func: ast.FunctionDef) -> types.FunctionType:
    """Compile a rewritten ``def`` into a function equivalent to ``target.base`` in scope."""
    base = target.base
    freevars = list(base.__code__.co_freevars)
    # rewritten code names torch as `torch` (torch_names.py, and what the passes write); a
    # module that imports it under another name alone is given that name here
    given = [] if "torch" in base.__globals__ or "torch" in freevars else ["torch"]
    outer_args = ast.arguments(posonlyargs=[], args=[ast.arg(v) for v in freevars + given]
                               + [ast.arg("__stitch_rt__"), ast.arg("__stitch_module__")],
                               vararg=None, kwonlyargs=[],
                               kw_defaults=[], kwarg=None, defaults=[])
    # defined under a name of its own: under its own name it would be a local of the outer
    # function, and a method that calls the module function of its name would call itself
    func = copy.copy(func)
    func.name = "__stitch_def__"
    outer = ast.FunctionDef(name="__stitch_outer__", args=outer_args,
                            body=[func, ast.Return(ast.Name(func.name, ast.Load()))],
                            decorator_list=[], returns=None, type_params=[])
    parts = base.__qualname__.split(".")
    cls_name = parts[-2] if len(parts) >= 2 and parts[-2] != "<locals>" else None
    body: list[ast.stmt] = [outer]
    if cls_name:  # keeps private-name mangling (self.__x) identical
        body = [ast.ClassDef(name=cls_name, bases=[], keywords=[], body=[outer],
                             decorator_list=[], type_params=[])]
    module = ast.Module(body=body, type_ignores=[])
    ast.fix_missing_locations(module)
    code = compile(module, base.__code__.co_filename, "exec", dont_inherit=True)
    outer_code = _find_code(code, "__stitch_outer__")
    values = []
    for cell in base.__closure__ or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:
            raise SourceUnavailableError(
                f"{target.filename}: {target.qualname} closes over a variable that is not "
                "yet bound; it cannot be recompiled") from None
    # the outer function's own free variables: ``__class__`` where the method calls
    # ``super()`` (compiled inside the class body above), from the original's cell
    cells = dict(zip(base.__code__.co_freevars, base.__closure__ or (), strict=True))
    if any(v not in cells for v in outer_code.co_freevars):
        raise SourceUnavailableError(
            f"{target.filename}: {target.qualname} needs {outer_code.co_freevars} from an "
            "enclosing scope stitch cannot rebuild; it cannot be recompiled")
    maker = types.FunctionType(outer_code, base.__globals__, "__stitch_outer__", None,
                               tuple(cells[v] for v in outer_code.co_freevars) or None)
    new = maker(*values, *([torch] if given else []), runtime, _module_of(base.__globals__))
    new.__defaults__ = base.__defaults__
    # the original's own default objects; a keyword a rewrite added (a caller's
    # continuation, ``caller_continuation``) keeps the default it was compiled with
    new.__kwdefaults__ = {**(new.__kwdefaults__ or {}), **(base.__kwdefaults__ or {})} or None
    # tracebacks, Dynamo and the census name the frame by its code: the original's names
    new.__code__ = new.__code__.replace(co_name=base.__code__.co_name,
                                        co_qualname=base.__code__.co_qualname)
    new.__name__, new.__qualname__ = base.__name__, base.__qualname__
    new.__module__ = base.__module__
    new.__doc__ = base.__doc__
    new.__dict__.update(base.__dict__)
    new.__stitch_original__ = base
    return new


def _module_of(names: dict) -> types.ModuleType | None:
    """The module whose globals are ``names`` (a branch sets its globals as its attributes:
    ``branch_state``), or None."""
    found = sys.modules.get(names.get("__name__", ""))
    if found is not None and vars(found) is names:
        return found
    return next((m for m in list(sys.modules.values())
                 if getattr(m, "__dict__", None) is names), None)


def _find_code(code: types.CodeType, name: str) -> types.CodeType:
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            if const.co_name == name:
                return const
            found = _find_code(const, name) if const.co_name != name else None
            if found is not None:
                return found
    return None  # type: ignore[return-value]


# attributes by which a wrapper names the function it wraps: Dynamo traces
# ``wrapper.__original_fn`` of a ``torch.jit._script_if_tracing`` wrapper (torchvision's
# batched NMS) instead of calling the wrapper, so the closure cell alone is not enough
_WRAPPED_ATTRS = ("__original_fn", "__wrapped__")


def _wrapper_refs(raw: Any, base: Any) -> list[tuple[Any, str]]:
    """(wrapper, attribute) pairs along ``raw``'s chain of wrappers that hold ``base``."""
    found, seen = [], set()
    current = raw.__func__ if isinstance(raw, staticmethod | classmethod) else raw
    while current is not None and current is not base and id(current) not in seen:
        seen.add(id(current))
        attrs = getattr(current, "__dict__", {})
        found += [(current, a) for a in _WRAPPED_ATTRS if attrs.get(a) is base]
        current = attrs.get("__wrapped__")
    return found


@contextlib.contextmanager
def installed(replacements: dict[tuple[str, int], tuple[Target, types.FunctionType]]
              ) -> Iterator[None]:
    """Install rewritten functions (and the exact shims, ``shims.SHIMS``); restore the
    originals on exit, whatever happens."""
    undo: list = []
    installing(tuple(new for _, new in replacements.values()))
    try:
        with shimmed():
            for target, new in replacements.values():
                if target.cell is not None:
                    old = target.cell.cell_contents
                    target.cell.cell_contents = new
                    undo.append(("cell", target.cell, old))
                    for owner, attr in _wrapper_refs(target.raw, old):
                        setattr(owner, attr, new)
                        undo.append(("attr", owner, attr, old))
                else:
                    raw = target.raw
                    value = (type(raw)(new) if isinstance(raw, staticmethod | classmethod)
                             else new)
                    undo.append(("attr", target.owner, target.attr, raw))
                    setattr(target.owner, target.attr, value)
                    for namespace, key in _aliases(target):
                        undo.append(("item", namespace, key, namespace[key]))
                        namespace[key] = value
            yield
    finally:
        for entry in reversed(undo):
            if entry[0] == "cell":
                entry[1].cell_contents = entry[2]
            elif entry[0] == "item":
                entry[1][entry[2]] = entry[3]
            else:
                setattr(entry[1], entry[2], entry[3])


def _aliases(target: Target) -> list[tuple[dict, str]]:
    """Where else a module-level function is bound: other modules' globals holding the very
    function object (a package's re-export, ``from m import f`` in a user module), and the
    registries of its own package (``_registry_entries``); a call through any of them must
    reach the rewrite."""
    if target.aliases is None:
        found = []
        if isinstance(target.owner, types.ModuleType):
            package = target.owner.__name__.split(".")[0]
            for module in list(sys.modules.values()):
                namespace = getattr(module, "__dict__", None)
                if module is target.owner or not isinstance(namespace, dict):
                    continue
                found += [(namespace, k) for k, v in list(namespace.items())
                          if v is target.raw]
                if getattr(module, "__name__", "").split(".")[0] == package:
                    found += _registry_entries(namespace, target.raw)
            found += _registry_entries(vars(target.owner), target.raw)
        target.aliases = found
    return target.aliases


def _registry_entries(namespace: dict, raw) -> list[tuple[dict, str]]:
    """Entries holding ``raw`` in the dicts a module's namespace holds, directly or as a
    class attribute of a class it defines: function registries (transformers'
    ``AttentionMaskInterface._global_mapping``, ``ALL_ATTENTION_FUNCTIONS``) through which
    library code calls the function by key, not by name."""
    found = []
    name = namespace.get("__name__")
    for value in list(namespace.values()):
        dicts = [value] if type(value) is dict else []
        if isinstance(value, type) and value.__module__ == name:
            dicts += [d for d in vars(value).values() if type(d) is dict]
        for d in dicts:
            found += [(d, k) for k, v in list(d.items()) if v is raw]
    return found
