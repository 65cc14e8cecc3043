"""Python state compared between the model and the program: the slots a forward can reach
outside its own instances (class attributes, module globals, closure cells) and what they
hold, a few levels deep.

Both sides act on the same slots (a copy of the model shares its class and its globals), so
each comparison snapshots the slots, runs the model, reads them, puts them back, runs the
program, and reads them again: the two readings must agree::

    Model.history.append(h) on one side only  ->  VerificationError naming Model.history
"""

from __future__ import annotations

import collections
import io
import types
from collections.abc import Callable

import torch
from torch._subclasses.fake_tensor import FakeTensor

from capture.isolation import rng_state, set_rng_state
from capture.object_state import running_thread, user_class
from capture.owners import covered, owned_attributes, owner_reading
from capture.reachable import MISSING, Slot, restore, snapshot
from capture.readings import torch_internal

from ..errors import VerificationError

_DEPTH = 3  # containers inside containers compared this deep (then by identity)


def _value(value, depth: int = 0):
    """A comparable reading of ``value``: tensors cloned, containers copied, plain objects
    by identity and (for user objects) their attributes."""
    cls = type(value)
    if cls in _PLAIN or value is MISSING:
        return ("value", value)
    known = getattr(value, "__class__", None) is cls  # isinstance asks it too (a proxy)
    if known and _BY_IDENTITY.get(cls):
        return ("object", id(value))
    if isinstance(value, FakeTensor):  # left by a trace: compares by identity, never by value
        return ("object", id(value))
    if isinstance(value, torch.Tensor):
        return ("tensor", value.detach().clone())
    if isinstance(value, bool | int | float | complex | str | bytes | range):
        return ("value", value)
    if depth >= _DEPTH:
        return ("object", id(value))
    if cls is list or cls is tuple:
        return (cls.__name__, [("value", v) if type(v) in _PLAIN else _value(v, depth + 1)
                               for v in value])
    if cls is dict:
        return ("dict", [(repr(k), ("value", v) if type(v) in _PLAIN else _value(v, depth + 1))
                         for k, v in dict.items(value)])
    if cls is set or cls is frozenset:
        return ("set", sorted(repr(v) for v in value))
    held = _held_state(value) if not known or _may_hold(cls) else None
    attributes = getattr(value, "__dict__", None) if not running_thread(value) else None
    slotted = _slot_attributes(value) if user_class(cls) else []
    if (type(attributes) is dict or slotted) and not isinstance(value, torch.nn.Module | type) \
            and _user_object(value):
        items = [*((k, v) for k, v in (dict.items(attributes) if type(attributes) is dict
                                       else ()) if k not in _MACHINERY), *slotted]
        held_items = [] if held is None else [("<items>", _value(held, depth))]
        if items or held is None:  # a dict subclass with attributes: both (ModelOutput)
            return ("object", id(value), held_items + [
                (k, ("value", v) if type(v) in _PLAIN else _value(v, depth + 1))
                for k, v in items])
    if held is not None:
        return _value(held, depth)
    if known and cls not in _BY_IDENTITY:
        _BY_IDENTITY[cls] = _identity_only(cls)
    return ("object", id(value))


# attributes Python's own machinery keeps on a module: the warnings module's record of where
# it warned (made by the first warning a line of the module raises, on whichever run of the
# two compared it falls, also for a torch warning the comparison leaves out)
_MACHINERY = frozenset({"__warningregistry__"})
# read as themselves: a reading ("value", v), compared by equality
_PLAIN = frozenset({bool, int, float, complex, str, bytes, range, type(None)})
# type -> whether its every instance reads as ("object", id) (``_identity_only``), as met
_BY_IDENTITY: dict[type, bool] = {}
# type -> whether ``_held_state`` may read something of its instances (``_may_hold``)
_HOLDS: dict[type, bool] = {}


def _may_hold(cls: type) -> bool:
    """Whether ``_held_state`` can return something for an instance of ``cls``: the kinds
    it reads, by type (an instance of any other type holds nothing it reads)."""
    known = _HOLDS.get(cls)
    if known is None:
        known = _HOLDS[cls] = (
            issubclass(cls, dict | list | collections.deque | tuple | bytearray | io.StringIO
                       | io.BytesIO | types.GeneratorType)
            or cls.__module__ in ("numpy", "itertools")
            or (cls.__module__ == "builtins" and cls.__name__.endswith("iterator")))
    return known


def _identity_only(cls: type) -> bool:
    """Whether every instance of ``cls`` reads by identity alone, whatever it holds: no
    tensor, number or set, nothing ``_held_state`` reads, and either a module or class,
    or of a package whose objects compare by identity (``_OPAQUE``). The attributes of
    such an object are never read, so its reading needs no look inside."""
    return not (issubclass(cls, torch.Tensor | bool | int | float | complex | str | bytes
                           | range | set | frozenset) or _may_hold(cls)) \
        and (issubclass(cls, torch.nn.Module | type)
             or (cls.__module__ or "").split(".")[0] in _OPAQUE)


def _held_state(value):
    """What a container or a stateful library object holds, as plain values to read: a
    dict or list subclass's items (``OrderedDict``, ``Counter``, a namedtuple), a deque's,
    a bytearray's bytes, a numpy array's values (as a tensor), a ``StringIO``'s text and
    position, a generator's position, a builtin or itertools iterator's state (from its
    own ``__reduce__``: the sequence and index, nothing consumed). None for anything else.
    Without these such state compared by identity, and a forward that advanced an
    iterator or wrote an array in place was never seen doing so."""
    cls = type(value)
    if isinstance(value, dict):
        return dict(dict.items(value))
    if isinstance(value, list | collections.deque):
        return list(list.__iter__(value) if isinstance(value, list) else value)
    if isinstance(value, tuple) and not isinstance(value, torch.Size):
        return tuple(tuple.__iter__(value))
    if isinstance(value, bytearray):
        return bytes(value)
    if cls.__module__ == "numpy" and cls.__name__ == "ndarray":
        try:
            return torch.from_numpy(value.copy())
        except TypeError:  # an object array: its items
            return value.tolist()
    if isinstance(value, io.StringIO | io.BytesIO):
        return ("closed",) if value.closed else (value.getvalue(), value.tell())
    if isinstance(value, types.GeneratorType):
        frame = value.gi_frame
        return ("generator", frame.f_lasti if frame is not None else "finished")
    if cls.__module__ in ("builtins", "itertools") and (
            cls.__name__.endswith("iterator") or cls.__module__ == "itertools"):
        try:
            return ("iterator", cls.__reduce__(value))
        except (TypeError, ValueError):
            return None
    return None


def _slot_attributes(value) -> list[tuple[str, object]]:
    """A ``__slots__`` object's attributes (``@dataclass(slots=True)``), in class order."""
    names = [n for c in type(value).__mro__ for n in getattr(c, "__slots__", ())
             if isinstance(n, str) and n not in ("__dict__", "__weakref__")]
    return [(n, getattr(value, n, MISSING)) for n in dict.fromkeys(names)]


# objects of these packages keep their own caches and handles (a ``logging.Logger``
# refills its level cache as it logs): compared by identity, not by their attributes
_OPAQUE = frozenset({"logging", "torch", "threading", "_thread", "weakref", "io", "_io"})


def _user_object(value) -> bool:
    """An object compared by its attributes: user classes' and plain records
    (``types.SimpleNamespace``, dataclasses); library objects with caches by identity."""
    return (type(value).__module__ or "").split(".")[0] not in _OPAQUE


def _same(a, b, rtol, atol) -> bool:
    if a[0] != b[0] or len(a) != len(b):
        return False
    if a[0] == "tensor":
        x, y = a[1], b[1]
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        try:
            torch.testing.assert_close(y, x, rtol=rtol, atol=atol, equal_nan=True)
        except AssertionError:
            return False
        return True
    if a[0] in ("list", "tuple"):
        return len(a[1]) == len(b[1]) and all(
            x == y if x[0] == "value" else _same(x, y, rtol, atol)
            for x, y in zip(a[1], b[1], strict=True))
    if a[0] == "dict" or (a[0] == "object" and len(a) == 3):
        items_a, items_b = a[-1], b[-1]
        if a[0] == "object" and a[1] != b[1]:
            return False
        return [k for k, _ in items_a] == [k for k, _ in items_b] and all(
            x == y if x[0] == "value" else _same(x, y, rtol, atol)
            for (_, x), (_, y) in zip(items_a, items_b, strict=True))
    return a == b


def read(slots: list[Slot]) -> list:
    return [_value(slot.get()) for slot in slots]


_INTERNALS = frozenset(torch.nn.Module().__dict__) | {"training"}


def attribute_readings(model: torch.nn.Module) -> dict[str, tuple]:
    """Every plain attribute of the model's modules (not submodules, parameters or
    buffers) and of the plain objects they hold (``capture.owners``; such an object is read
    by its class where it is held, its attributes at its own path), by path: ``(reading,
    value)``, what a forward can change that the program does not hold."""
    return {f"{path}.{k}" if path else k: (owner_reading(v, False) if listed else _value(v), v)
            for path, m, k, v, listed in owned_attributes(model)
            if k not in _INTERNALS and not isinstance(v, torch.nn.Module)
            and not (isinstance(m, torch.nn.Module) and torch_internal(m, k))}


def changed_attributes(before: dict, after: dict, replayed) -> list[str]:
    """The attributes (paths) a run changed, other than those the epilogue replays. An
    object rebound to an equal one (a device, a dtype: a cache moved to where it already
    was) is no change."""
    missing = (("missing",), None)

    def same(a, b) -> bool:
        if _same(a[0], b[0], 0, 0):
            return True
        if a[0][0] != "object" or b[0][0] != "object":
            return False
        try:
            return a[1] is not b[1] and (a[1] == b[1]) is True  # rebound, not changed
        except Exception:  # noqa: BLE001 - no equality: a change
            return False

    replayed = set(replayed)
    return sorted(k for k in before.keys() | after.keys()
                  if k not in replayed and not covered(k, replayed)
                  and not same(before.get(k, missing), after.get(k, missing)))


def compared(slots: list[Slot], run_model: Callable, run_program: Callable,
             wanted: Callable[[object], bool] | None = None):
    """Run both from the same slot state and the same random-number state (a forward that
    draws noise, VITS's durations or ViT-MAE's masking, draws the same noise in both);
    returns (model's result, program's result, check) where ``check(what, rtol, atol)``
    raises VerificationError naming the first slot the two runs left differently. The
    slots are read before and after each run, and after ``restore`` only those the model's
    run changed (whether ``restore`` put one back matters only for those). ``wanted``:
    whether the model's result asks for the program's run at all; where it does not, the
    slots and random-number state are put back and the result is (model's, None, None)."""
    before = snapshot(slots)
    first = read(slots)
    rng = rng_state()
    expected = run_model()
    if wanted is not None and not wanted(expected):
        restore(before)
        set_rng_state(rng)
        return expected, None, None
    after_model = read(slots)
    changed = [i for i, (a, b) in enumerate(zip(first, after_model, strict=True))
               if not _same(b, a, 0, 0)]
    restore(before)
    restored = {i: _value(slots[i].get()) for i in changed}
    set_rng_state(rng)
    actual = run_program()
    after_program = read(slots)

    def check(what: str, rtol=None, atol=None) -> None:
        for i in changed:
            slot, a, b = slots[i], first[i], after_model[i]
            if not _same(restored[i], a, 0, 0):
                # the model changed what stitch cannot put back (an iterator it advanced, a
                # numpy array it wrote): the program would start from the model's state,
                # so comparing after the two runs says nothing; no replay makes it either
                path, was, now = _first_difference(a, b, 0, 0)
                raise VerificationError(
                    f"{what}: the forward changes {slot.describe()}{path} (from "
                    f"{_short(was)} to {_short(now)}), state stitch can neither put back "
                    "nor replay (an iterator's position, an array written in place, a "
                    "stream's text): the program would never change it. Keep such state "
                    "in a buffer (register_buffer), return it, or move it out of forward.")
        for slot, a, b in zip(slots, after_model, after_program, strict=True):
            if not _same(a, b, rtol, atol):
                path, a, b = _first_difference(a, b, rtol, atol)
                raise VerificationError(
                    f"{what}: {slot.describe()}{path} differs after the call: the model "
                    f"left {_short(a)}, the stitched program {_short(b)}. torch.export records "
                    "no Python state; stitch replays what it measured on the examples "
                    "(appends, counters, dict item sets, state set before it is read: "
                    "docs/guarantees.md), and this change is none of those here. Keep such "
                    "state in a buffer, return it, or append to a list.")
    return expected, actual, check


def _first_difference(a, b, rtol, atol, path: str = "") -> tuple[str, tuple, tuple]:
    """Where two readings first differ, as ``(path, a's part, b's part)``: down
    through the items of lists, tuples and dicts and the attributes of one object
    (``.ticks``, ``['last'][0]``), so the message names the value that changed."""
    if a[0] == b[0] and len(a) == len(b):
        if a[0] in ("list", "tuple") and len(a[1]) == len(b[1]):
            items = [(f"[{i}]", x, y) for i, (x, y) in enumerate(zip(a[1], b[1], strict=True))]
        elif a[0] == "dict" or (a[0] == "object" and len(a) == 3 and a[1] == b[1]):
            keys_a, keys_b = [k for k, _ in a[-1]], [k for k, _ in b[-1]]
            if keys_a != keys_b:
                return path, a, b
            items = [(f"[{k}]" if a[0] == "dict" else f".{k}", x, y)
                     for (k, x), (_, y) in zip(a[-1], b[-1], strict=True)]
        else:
            items = []
        for step, x, y in items:
            if not _same(x, y, rtol, atol):
                return _first_difference(x, y, rtol, atol, path + step)
    return path, a, b


def _short(reading) -> str:
    kind = reading[0]
    if kind == "value":
        text = repr(reading[1])
    elif kind == "tensor":
        text = f"a tensor of shape {tuple(reading[1].shape)}"
    elif kind in ("list", "tuple", "dict", "set"):
        text = f"a {kind} of {len(reading[1])} item(s)"
    else:
        text = "an object" + (" with attributes " + ", ".join(k for k, _ in reading[2])
                              if len(reading) == 3 else "")
    return text if len(text) <= 80 else text[:77] + "..."
