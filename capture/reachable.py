"""The Python state a forward can reach, as slots: where a value lives outside tensors.

A forward can change more than its module's own attributes: a list kept on the class
(``Model.history``), a module global of any module whose code it runs (``HISTORY``), a
variable captured by a closure (``seen`` in ``make_model``), and containers or plain objects
held by these. torch.export records none of it. stitch finds the slots from the model's
classes and from the code they reach (functions named by that code, their globals and
closure cells, transitively, user code only), compares them before and after runs, restores
them after analysis, and verifies them between model and program::

    Slot(CLASS, "zoo.Model", "history")     type.__setattr__ / vars(cls)
    Slot(GLOBAL, "zoo", "HISTORY")          vars(module)
    Slot(CLOSURE, "make.<locals>.M.forward", "seen")   cell.cell_contents
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum

import torch

from .object_state import namespace_roots, put_back, record
from .source import is_user_file

MISSING = object()
_CODE_ONLY = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type,
              types.MethodType, classmethod, staticmethod, property, types.CodeType)
_MAX_FUNCTIONS = 2000  # bound on the transitive walk over functions (a big library)


class SlotKind(StrEnum):
    CLASS = "class attribute"
    GLOBAL = "module global"
    CLOSURE = "closure variable"
    DEFAULT = "default argument"


@dataclass(frozen=True)
class Slot:
    """One named place holding Python state outside the model's own instances."""

    kind: SlotKind
    owner: str  # "pkg.mod.Class", "pkg.mod", or the function's qualified name
    name: str
    holder: object = field(compare=False, hash=False, repr=False)  # class / globals / cell
    file: str = field(default="", compare=False, hash=False)  # where its owner is defined

    def get(self):
        if self.kind == SlotKind.DEFAULT:
            return _default_of(self.holder, self.name)
        if self.kind == SlotKind.CLOSURE:
            try:
                return self.holder.cell_contents
            except ValueError:
                return MISSING
        if self.kind == SlotKind.GLOBAL:
            return self.holder.get(self.name, MISSING)
        return vars(self.holder).get(self.name, MISSING)

    def set(self, value) -> None:
        if self.kind == SlotKind.DEFAULT:
            _set_default(self.holder, self.name, value)
        elif self.kind == SlotKind.CLOSURE:
            self.holder.cell_contents = value
        elif self.kind == SlotKind.CLASS:
            if value is MISSING:
                with contextlib.suppress(AttributeError):
                    type.__delattr__(self.holder, self.name)
            else:
                type.__setattr__(self.holder, self.name, value)
        elif value is MISSING:
            self.holder.pop(self.name, None)
        else:
            self.holder[self.name] = value

    @property
    def target(self) -> str:
        """How the epilogue names it: ``class:pkg.mod.Class.attr``, ``global:pkg.mod.name``,
        ``closure:qualname.var`` (a list attribute of the model is named by its path)."""
        prefix = {SlotKind.CLASS: "class", SlotKind.GLOBAL: "global",
                  SlotKind.CLOSURE: "closure", SlotKind.DEFAULT: "default"}[self.kind]
        return f"{prefix}:{self.owner}.{self.name}"

    def describe(self) -> str:
        return f"{self.kind.value} {self.owner}.{self.name}"


def _library_class(cls: type) -> bool:
    module = getattr(cls, "__module__", "") or ""
    return cls is object or module == "builtins" or module.startswith("torch")


def _functions_of(value) -> list[types.FunctionType]:
    """The plain functions behind a class-dict entry (methods, static/class methods,
    properties, decorated functions through ``__wrapped__``)."""
    out = []
    if isinstance(value, staticmethod | classmethod):
        value = value.__func__
    if isinstance(value, property):
        return [f for f in (value.fget, value.fset) if isinstance(f, types.FunctionType)]
    while isinstance(value, types.FunctionType):
        out.append(value)
        value = getattr(value, "__wrapped__", None)
    return out


def _user_function(fn: types.FunctionType) -> bool:
    return is_user_file(fn.__code__.co_filename)


def _names_in(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names_in(const)
    return names


def reachable_slots(model: torch.nn.Module, extra_functions=()) -> list[Slot]:
    """Slots of the model's classes (their MROs, torch's own classes left out), and the
    module globals and closure cells of every user function reachable from their methods
    by name (a helper a method calls, the helper's helpers), plus ``extra_functions``."""
    slots: dict[tuple, Slot] = {}
    functions: list[types.FunctionType] = list(extra_functions)
    classes = {cls for m in model.modules() for cls in type(m).__mro__ if not _library_class(cls)}
    for cls in classes:
        _class_slots(cls, slots, functions)
    seen: set[int] = set()
    namespaces: dict[int, dict] = {}  # a module's globals (also one not in sys.modules)
    while functions and len(seen) < _MAX_FUNCTIONS:
        fn = functions.pop()
        if id(fn) in seen or not _user_function(fn):
            continue
        seen.add(id(fn))
        namespaces[id(fn.__globals__)] = fn.__globals__
        for var, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=False):
            with contextlib.suppress(ValueError):
                value = cell.cell_contents
                if isinstance(value, types.FunctionType):
                    functions.append(value)
                    continue
                if isinstance(value, _CODE_ONLY):
                    continue
            slots.setdefault((SlotKind.CLOSURE, fn.__qualname__, var),
                             Slot(SlotKind.CLOSURE, fn.__qualname__, var, cell,
                                  fn.__code__.co_filename))
        for var in _mutable_defaults(fn):  # ``def record(v, acc=[])``: acc is state
            slots.setdefault((SlotKind.DEFAULT, fn.__qualname__, var),
                             Slot(SlotKind.DEFAULT, fn.__qualname__, var, fn,
                                  fn.__code__.co_filename))
        names = _names_in(fn.__code__)
        for name in names:
            value = fn.__globals__.get(name)
            # a user module the code reaches as an attribute (``utils.count_call()``): the
            # functions and classes it names there
            held = [value]
            if _user_module(value):  # its globals are slots too (``utils.LOG.append(h)``)
                namespaces[id(vars(value))] = vars(value)
                held = [vars(value).get(n) for n in names]
            for value in held:
                functions.extend(_functions_of(value))
                if isinstance(value, type) and not _library_class(value) \
                        and _user_class(value):
                    _class_slots(value, slots, functions)
    _inherited_slots(classes, slots)
    for namespace in namespaces.values():
        module_name = namespace.get("__name__", "?")
        for name, value in list(namespace.items()):
            if not name.startswith("__") and not isinstance(value, _CODE_ONLY):
                slots.setdefault((SlotKind.GLOBAL, module_name, name),
                                 Slot(SlotKind.GLOBAL, module_name, name, namespace,
                                      namespace.get("__file__", "") or ""))
    return list(slots.values())


def _class_slots(cls: type, slots: dict, functions: list) -> None:
    """A class's plain attributes as slots (a model class's ``history``, a helper class's
    registry ``Registry.items``); its methods join the walk."""
    owner = f"{cls.__module__}.{cls.__qualname__}"
    for name, value in list(vars(cls).items()):
        found = _functions_of(value)
        if found:
            functions.extend(found)
        elif not (name.startswith("__") and name.endswith("__")) \
                and not isinstance(value, _CODE_ONLY) and not _descriptor(value):
            slots.setdefault((SlotKind.CLASS, owner, name),
                             Slot(SlotKind.CLASS, owner, name, cls, _file_of(cls)))


def _inherited_slots(classes: set[type], slots: dict) -> None:
    """A class attribute a subclass inherits, as a slot of the subclass too (missing there
    until set): ``type(self).count += 1`` reads the base's value and creates the
    subclass's own, which the runs must put back (delete) and verification compare
    (otherwise the export leaves ``Sub.count`` behind, and a program that never counts
    passes)."""
    for cls in classes:
        owner = f"{cls.__module__}.{cls.__qualname__}"
        for base in cls.__mro__[1:]:
            for key, slot in list(slots.items()):
                if key[0] == SlotKind.CLASS and slot.holder is base \
                        and slot.name not in vars(cls):
                    slots.setdefault((SlotKind.CLASS, owner, slot.name),
                                     Slot(SlotKind.CLASS, owner, slot.name, cls,
                                          _file_of(cls)))


_MUTABLE_DEFAULTS = (list, dict, set, __import__("collections").deque, bytearray)


def _default_names(fn: types.FunctionType) -> dict[str, int | None]:
    """Parameter name -> its index in ``__defaults__`` (None: in ``__kwdefaults__``)."""
    code = fn.__code__
    defaults = fn.__defaults__ or ()
    positional = code.co_varnames[:code.co_argcount]
    out: dict[str, int | None] = {
        name: i for i, name in enumerate(positional[len(positional) - len(defaults):])}
    out.update({name: None for name in (fn.__kwdefaults__ or {})})
    return out


def _mutable_defaults(fn: types.FunctionType) -> list[str]:
    return [name for name in _default_names(fn)
            if isinstance(_default_of(fn, name), _MUTABLE_DEFAULTS)]


def _default_of(fn: types.FunctionType, name: str):
    index = _default_names(fn).get(name, MISSING)
    if index is MISSING:
        return MISSING
    return (fn.__kwdefaults__ or {}).get(name, MISSING) if index is None \
        else fn.__defaults__[index]


def _set_default(fn: types.FunctionType, name: str, value) -> None:
    index = _default_names(fn).get(name, MISSING)
    if index is None:
        fn.__kwdefaults__ = {**(fn.__kwdefaults__ or {}), name: value}
    elif index is not MISSING:
        defaults = list(fn.__defaults__)
        defaults[index] = value
        fn.__defaults__ = tuple(defaults)


def _user_module(value) -> bool:
    return isinstance(value, types.ModuleType) and is_user_file(getattr(value, "__file__", "")
                                                                or "")


def _user_class(cls: type) -> bool:
    module = __import__("sys").modules.get(getattr(cls, "__module__", "") or "")
    return module is None or is_user_file(getattr(module, "__file__", "") or "")


def _file_of(cls: type) -> str:
    import inspect

    try:
        return inspect.getsourcefile(cls) or ""
    except (TypeError, OSError):
        return ""


def _descriptor(value) -> bool:
    return hasattr(type(value), "__get__") and not isinstance(value, torch.Tensor)


@dataclass(frozen=True)
class Snapshot:
    """Slots' bindings, and the contents of every mutable object they hold
    (``capture/object_state.py``), as found."""

    bindings: list  # (slot, value) pairs
    contents: list  # object_state.record's


def snapshot(slots: list[Slot]) -> Snapshot:
    """Each slot's binding and, recursively, the contents of what it holds: containers,
    user objects' attributes, and the default arguments of the functions in the modules
    whose globals are slots (``def helper(x, seen=[])``)."""
    bindings = [(slot, slot.get()) for slot in slots]
    namespaces = {id(s.holder): s.holder for s in slots if s.kind == SlotKind.GLOBAL}
    roots = [v for _, v in bindings if v is not MISSING] + [
        v for namespace in namespaces.values() for v in namespace_roots(namespace)
        if isinstance(v, types.FunctionType)]
    return Snapshot(bindings, record(roots))


def restore(saved: Snapshot) -> None:
    """Put slots back as ``snapshot`` found them: bindings, then contents in place."""
    for slot, value in saved.bindings:
        if slot.get() is not value:
            slot.set(value)
    put_back(saved.contents)


@contextlib.contextmanager
def preserved_slots(slots: list[Slot]) -> Iterator[Snapshot]:
    """Put every slot back on exit, whatever happens: its binding, and the contents of what
    it holds, in place, to a bounded depth (a class list appended to during analysis is the
    user's list again, with its items; a helper object's counter is back to its value).
    Yields the snapshot (``restore`` puts it back)."""
    saved = snapshot(slots)
    try:
        yield saved
    finally:
        restore(saved)
