"""The contents of the mutable objects held by Python state, recorded and put back in
place: what a forward reaches through module globals, class attributes and closure cells,
to a bounded depth, so analysis runs leave nothing behind (identities kept)::

    REG = {"a": [], "b": [{"n": 0}]}    REG, REG["a"], REG["b"] and REG["b"][0] refilled
    COUNTS = defaultdict(int)            its items put back through dict's own methods
    TRACK = Tracker()                    vars(TRACK) put back (``TRACK.n += 1`` undone)
    def record(v, acc=[]): ...           record.__defaults__[0] emptied again
    log = logging.getLogger(...)         log.disabled put back (its own attributes only)

Everything is read and written through the builtin base classes' methods (``dict.copy``,
``list.__setitem__``), never through methods a subclass overrides (a registry that builds
objects in ``__getitem__``). Tensors, modules (``nn.Module`` and Python modules), classes
and functions are not contents; a user function's mutable default arguments are.
Objects whose state lives outside ``__dict__`` (``itertools.count``, generators, numpy
arrays) are not put back.
"""

from __future__ import annotations

import collections
import sys
import threading
import types
from collections.abc import Iterable

import torch

from .source import is_user_file

MAX_DEPTH = 6  # containers in containers followed this deep from a root
MAX_ITEMS = 4096  # items of one container followed (all of them are recorded)
MAX_OBJECTS = 50_000  # objects recorded in all (a big registry stays cheap)

_ATOMS = (bool, int, float, complex, str, bytes, type(None), range, slice, torch.dtype,
          torch.device, torch.Size)
_NOT_CONTENTS = (torch.Tensor, torch.nn.Module, types.ModuleType, type, types.CodeType,
                 types.BuiltinFunctionType, types.MethodType, property, classmethod,
                 staticmethod, types.FrameType, types.GeneratorType)
# libraries whose objects hold their own bookkeeping, never the user's state
_LIBRARIES = frozenset({"torch", "numpy", "sympy", "stitch", "capture", "typing"})
_user_types: dict[type, bool] = {}


def user_class(cls: type) -> bool:
    """A class defined in user code (``capture.source.is_user_file``; a model library such
    as transformers counts), or a plain record (``types.SimpleNamespace``)."""
    known = _user_types.get(cls)
    if known is None:
        module = sys.modules.get(getattr(cls, "__module__", "") or "")
        known = cls is types.SimpleNamespace or (module is not None and is_user_file(
            getattr(module, "__file__", "") or ""))
        _user_types[cls] = known
    return known


def instance_dict(value) -> dict | None:
    """``vars(value)`` read without calling an overridden ``__getattribute__``; None when
    it has none (or an odd one), and for a running thread's object (``running_thread``)."""
    if running_thread(value):
        return None
    try:
        attributes = object.__getattribute__(value, "__dict__")
    except (AttributeError, TypeError):
        return None
    return attributes if type(attributes) is dict else None


def running_thread(value) -> bool:
    """A ``threading.Thread`` object whose thread is running: that thread sets the object's
    attributes whenever it runs (tqdm's monitor records when it last woke), so a change
    seen around a forward may not be the forward's. Such an object is read, compared and
    put back by identity only, never by its attributes (a limit: a forward's own write to
    them goes unseen)."""
    return isinstance(value, threading.Thread) and threading.Thread.is_alive(value)


def namespace_roots(namespace: dict) -> list:
    """What a module's globals hold, for ``record``: the values, and the functions of the
    user classes among them (a method's mutable default argument)."""
    values = [v for k, v in list(namespace.items()) if not k.startswith("__")]
    methods = [f for cls in values if isinstance(cls, type) and user_class(cls)
               for f in list(vars(cls).values()) if isinstance(f, types.FunctionType)]
    return values + methods


def record(roots: Iterable) -> list[tuple]:
    """``(object, kind, contents)`` for every mutable object reachable from ``roots``
    (containers' items, dict values, user objects' attributes, user functions' defaults),
    each shallow: what ``put_back`` needs to restore it in place."""
    out: list[tuple] = []
    seen: set[int] = set()
    stack = [(value, 0) for value in roots]
    while stack and len(out) < MAX_OBJECTS:
        value, depth = stack.pop()
        if isinstance(value, _ATOMS) or id(value) in seen:
            continue
        seen.add(id(value))
        children = _record_one(value, out)
        if depth < MAX_DEPTH:
            stack.extend((child, depth + 1) for child in children)
    return out


def _record_one(value, out: list) -> list:
    """Record ``value``'s own contents into ``out``; return the objects it holds."""
    cls = type(value)
    if isinstance(value, types.FunctionType):
        if not is_user_file(value.__code__.co_filename):
            return []
        return [d for d in (value.__defaults__, value.__kwdefaults__) if d is not None]
    if isinstance(value, _NOT_CONTENTS) or (
            (cls.__module__ or "").split(".")[0] in _LIBRARIES):
        return []
    children: list = []
    if isinstance(value, list):
        items = list.copy(value)
        out.append((value, "list", items))
        children = items[:MAX_ITEMS]
    elif isinstance(value, collections.OrderedDict):
        items = list(collections.OrderedDict.items(value))
        out.append((value, "odict", items))
        children = [v for _, v in items[:MAX_ITEMS]]
    elif isinstance(value, dict):
        items = dict(dict.items(value))  # dict.copy of a subclass may call __getitem__
        out.append((value, "dict", items))
        children = list(dict.values(items))[:MAX_ITEMS]
    elif isinstance(value, set):
        items = set.copy(value)
        out.append((value, "set", items))
        children = list(items)[:MAX_ITEMS]
    elif isinstance(value, collections.deque):
        items = list(collections.deque.__iter__(value))
        out.append((value, "deque", items))
        children = items[:MAX_ITEMS]
    elif isinstance(value, bytearray):
        out.append((value, "bytes", bytes(value)))
    elif isinstance(value, tuple | frozenset):
        children = list(value)[:MAX_ITEMS]
    attributes = instance_dict(value)
    if attributes is not None:
        copied = dict.copy(attributes)
        out.append((value, "vars", copied))
        if user_class(cls):  # a library object: its own attributes, not what they hold
            children += list(copied.values())[:MAX_ITEMS]
    return children


def put_back(recorded: list[tuple]) -> None:
    """Restore each recorded object in place, as ``record`` found it."""
    for value, kind, contents in recorded:
        if kind == "list":
            list.__setitem__(value, slice(None), contents)
        elif kind == "odict":
            collections.OrderedDict.clear(value)
            for k, v in contents:
                collections.OrderedDict.__setitem__(value, k, v)
        elif kind == "dict":
            dict.clear(value)
            dict.update(value, contents)
        elif kind == "set":
            set.clear(value)
            set.update(value, contents)
        elif kind == "deque":
            collections.deque.clear(value)
            collections.deque.extend(value, contents)
        elif kind == "bytes":
            bytearray.__setitem__(value, slice(None), contents)
        elif kind == "vars":
            attributes = instance_dict(value)
            if attributes is not None and not _same_items(attributes, contents):
                dict.clear(attributes)
                dict.update(attributes, contents)


def _same_items(now: dict, before: dict) -> bool:
    """The same keys bound to the same objects (an object's ``__dict__`` left alone
    keeps its shared-keys layout)."""
    return len(now) == len(before) and all(
        k in before and before[k] is v for k, v in dict.items(now))
