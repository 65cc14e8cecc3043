"""State a forward rebinds on every call to values it computes, set before it is read.

    self.corr_pyramid = [c0, c1, c2, c3]   # RAFT: rebuilt from the input on every call
    self.last_hidden = h                    # a tensor whose shape follows the input

torch.export drops such a rebinding (the exported program never sets the attribute). The
value is a container of tensors and plain numbers (a pytree of lists, tuples and dicts), or
a tensor the buffer rule cannot hold (its shape changes from call to call); when the forward
never reads the old value, the rebinding can be replayed exactly after the graph: the graph
returns the new value's tensors, and the epilogue sets the attribute to a new container of
them (``rebind`` entries). Whether the old value is read is measured, not guessed: the
forward runs once more with the attribute set, before each example, to a value that raises
when it is used (a call that does not set it counts as a read: it keeps the old value), and
the export traces with that value in place too, so a path the examples did not take that
keeps or reads the old value fails the export instead of baking it into the graph.
"""

from __future__ import annotations

import torch
import torch.utils._pytree as pytree

from .errors import error_chain

_PLAIN = (bool, int, float, str, type(None))


def rebindable(value) -> bool:
    """A pytree of tensors and plain values, holding at least one tensor, whose structure
    serializes (the epilogue is data: it rebuilds the container from its spec)."""
    try:
        leaves, spec = pytree.tree_flatten(value)
        pytree.treespec_dumps(spec)
    except Exception:  # noqa: BLE001 - an unregistered container: not rebindable
        return False
    return (any(isinstance(v, torch.Tensor) for v in leaves)
            and all(isinstance(v, (torch.Tensor, *_PLAIN)) for v in leaves))


class ReadBeforeSet(Exception):  # noqa: N818 - a signal, caught by the probe
    pass


class Unset:
    """Stands for a rebound attribute's old value during the probe run: any use raises."""

    def __init__(self, name: str, seen: set[str]) -> None:
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_seen", seen)

    def _read(self, *args, **kwargs):
        seen = object.__getattribute__(self, "_seen")
        seen.add(object.__getattribute__(self, "_name"))
        raise ReadBeforeSet(object.__getattribute__(self, "_name"))

    def __getattribute__(self, name):
        if name in ("_read", "__class__"):
            return object.__getattribute__(self, name)
        object.__getattribute__(self, "_read")()

    __getitem__ = __iter__ = __len__ = __bool__ = __call__ = __contains__ = _read
    __add__ = __radd__ = __mul__ = __rmul__ = __sub__ = __rsub__ = __matmul__ = _read
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __index__ = __float__ = _read
    __int__ = __neg__ = __setitem__ = __delitem__ = __str__ = __repr__ = _read
    __hash__ = None


def read_before_set(run, places: dict[str, tuple]) -> tuple[set[str], set[str]]:
    """``(read, unset)``: which of ``places`` (name -> (get, set)) some call reads before
    setting it, and which some call leaves unset (it keeps the old value: state only some
    calls change). Before each example each place is set to an ``Unset``;
    ``run(after_each)`` runs the examples; every place is put back afterwards. A run that
    fails for another reason counts every place as read (nothing is assumed)."""
    read: set[str] = set()
    unset: set[str] = set()
    originals = {name: get() for name, (get, _put) in places.items()}

    def poison() -> None:
        for name, (_get, put) in places.items():
            put(Unset(name, read))

    def after_each() -> None:
        unset.update(n for n, (get, _put) in places.items() if isinstance(get(), Unset))
        poison()

    poison()
    try:
        run(after_each)
    except Exception:  # noqa: BLE001 - measured: which place was read, or all of them
        if not read:
            read |= set(places)
    finally:
        for name, (_get, put) in places.items():
            put(originals[name])
    return read, unset - read


def read_while_traced(error: BaseException | None) -> str | None:
    """The place an ``Unset`` stood for, when ``error`` (or its causes) is its use."""
    return next((str(e) for e in error_chain(error) if isinstance(e, ReadBeforeSet)), None)


_NUMBER = (int, float, torch.SymInt, torch.SymFloat)


class Counting(Unset):
    """Stands for a counter's old value (``self.calls += 1``, ``Model.seen += x.shape[0]``,
    ``self.t = self.t - 0.5``): adding or subtracting a number gives a new ``Counting`` that
    remembers what was added, in order; any other use raises, as ``Unset`` does. After a
    call, the slot holding a ``Counting`` is a counter the epilogue can replay exactly: the
    old value plus each addend in turn (``x - y`` is ``x + (-y)`` exactly, for floats too)."""

    def __init__(self, name: str, seen: set[str], addends: tuple = ()) -> None:
        super().__init__(name, seen)
        object.__setattr__(self, "_addends", addends)

    def _plus(self, other):
        if isinstance(other, bool) or not isinstance(other, _NUMBER):
            return object.__getattribute__(self, "_read")()
        return Counting(object.__getattribute__(self, "_name"),
                        object.__getattribute__(self, "_seen"),
                        (*object.__getattribute__(self, "_addends"), other))

    def __add__(self, other):
        return object.__getattribute__(self, "_plus")(other)

    def __radd__(self, other):  # a + b == b + a exactly (ints and IEEE floats alike)
        return object.__getattribute__(self, "_plus")(other)

    def __sub__(self, other):
        if isinstance(other, bool) or not isinstance(other, _NUMBER):
            return object.__getattribute__(self, "_read")()
        return object.__getattribute__(self, "_plus")(-other)

    __iadd__ = __add__
    __isub__ = __sub__


def addends(value, name: str | None = None) -> tuple | None:
    """What a ``Counting`` was given, in order (None for anything else, or for the stand-in
    of another place than ``name``: ``self.a = self.b + 1`` is no counting of ``a``)."""
    if type(value) is not Counting or (
            name is not None and object.__getattribute__(value, "_name") != name):
        return None
    return object.__getattribute__(value, "_addends")


def counted(run, places: dict[str, tuple]) -> dict[str, list[tuple]]:
    """Which of ``places`` (name -> (get, set)) the calls only add numbers to: name -> the
    addends of each example (empty where a call adds nothing: a branch adds to it), for the
    places no call uses otherwise and some call adds to. Each place holds a ``Counting``
    during each example; every place is put back afterwards."""
    read: set[str] = set()
    per_call: dict[str, list[tuple]] = {name: [] for name in places}
    originals = {name: get() for name, (get, _put) in places.items()}

    def fresh() -> None:
        for name, (_get, put) in places.items():
            put(Counting(name, read))

    def after_each() -> None:
        for name, (get, _put) in places.items():
            found = addends(get(), name)
            if found is None:  # set to something else: not a counter
                read.add(name)
            else:
                per_call[name].append(found)
        fresh()

    fresh()
    try:
        run(after_each)
    except Exception:  # noqa: BLE001 - a use that is not an addition, or the model failed
        if not read:
            read |= set(places)
    finally:
        for name, (_get, put) in places.items():
            put(originals[name])
    return {name: calls for name, calls in per_call.items()
            if name not in read and any(calls)}
