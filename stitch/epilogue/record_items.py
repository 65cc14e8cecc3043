"""A dict's item changes, recorded while the model is traced (capture/dict_items.py found
which items the forward sets, and which it only adds to)::

    self.stats["last"] = h.mean()   ->  a ``set_item`` entry: the graph returns the value,
                                        the epilogue sets the item to it
    COUNTS["calls"] += 1            ->  an ``add`` entry with the key: the epilogue adds 1

The dict is replaced, for the trace, by a ``RecordingDict`` holding its items: a set is
recorded (and seen by the call's later reads); a read of a changed item the call has not
set yet gives a ``Counting`` (additions only) for an added item, and fails the export for a
set one (the program would hold the value it had when traced); other uses of a changed item
(a membership test, iteration) fail it likewise.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch.utils._pytree as pytree

from capture.rebound import Counting, ReadBeforeSet, addends

from ..errors import UnsupportedSideEffectError
from .entries import Entry
from .stand_ins import caller, current_recorder, refused_read, where
from .targets import UNTAKEN, current, rebind


def _read_from_user(name: str):
    return refused_read(dict, name, (
        "the forward reads dict {!r} whole (compares, merges or prints it), whose items it "
        "changes; stitch replays item sets and additions only, so the program would read "
        "the dict as it was when traced. Read the items you need, or keep the state in a "
        "buffer."))


# iterating, sizing or popping a dict whose items the forward changes: refused where the
# model's code does it; torch's own calls pass (Dynamo's guards on a dict a cond's arm names)
_WHOLE_USE = ("the forward iterates, sizes or pops dict {!r}, whose items it changes; stitch "
              "replays item sets and additions only")


class RecordingDict(dict):
    def __init__(self, target: str, items: dict, keys: dict, location: str,
                 start: dict | None = None) -> None:
        super().__init__(items)
        self.target, self._keys, self._location = target, keys, location
        self._start = start if start is not None else dict(items)
        self._now: dict = {}  # what this call set (its later reads see it)
        # only paths no example took change it (capture/untaken_state.py): no read
        # is replayable, and any key a branch changes is replayed as the branch changes it
        self._untaken = target in UNTAKEN

    def __getitem__(self, key):
        if key in self._now:
            return self._now[key]
        if self._untaken:  # no example used it: what a read sees is not known
            raise ReadBeforeSet(self.target)
        how = self._keys.get(key)
        if how == "add":
            return Counting(self._name(key), set())
        if how in ("set", "untaken"):  # "untaken": only a branch no example took sets it
            raise ReadBeforeSet(self.target)
        return dict.__getitem__(self, key)

    def get(self, key, default=None):
        if key in self._now or key in self._keys or self._untaken:
            return self[key]
        return dict.get(self, key, default)

    def __contains__(self, key) -> bool:
        if (key in self._keys or self._untaken) and key not in self._now:
            raise ReadBeforeSet(self.target)
        return dict.__contains__(self, key)

    def __setitem__(self, key, value) -> None:
        frame = caller()
        recorder = current_recorder()
        how = self._keys.get(key)
        if recorder is None or how is None:
            raise UnsupportedSideEffectError(
                f"{where(frame)}: the forward sets item {key!r} of {self.target!r}, which "
                "no example set; stitch replays the items the examples showed. Add an example "
                "that sets it, or keep the value in a buffer.")
        added = addends(value)
        if how == "add":
            if added is None or object.__getattribute__(value, "_name") != self._name(key):
                raise ReadBeforeSet(self.target)  # this path sets what the examples added to
            recorder.entries.append(Entry("add", where(frame), tuple(
                recorder.arg(v) for v in added), {"target": self.target, "key": key,
                                                  "start": self._start.get(key)}))
            self._now[key] = Counting(self._name(key), set())  # later += add again
            return
        if added is not None:
            raise ReadBeforeSet(self.target)
        leaves, spec = pytree.tree_flatten(value)
        recorder.entries.append(Entry("set_item", where(frame), tuple(
            recorder.arg(v, False) for v in leaves), {
                "target": self.target, "key": key, "spec": pytree.treespec_dumps(spec)}))
        self._now[key] = value

    def update(self, other=(), **more) -> None:
        for key, value in dict(other, **more).items():
            self[key] = value

    def _name(self, key) -> str:
        return f"{self.target}[{key!r}]"

    __iter__, __len__, keys, items, values = (refused_read(dict, n, _WHOLE_USE) for n in (
        "__iter__", "__len__", "keys", "items", "values"))
    __delitem__, pop, popitem, setdefault, clear, copy = (
        refused_read(dict, n, _WHOLE_USE) for n in (
            "__delitem__", "pop", "popitem", "setdefault", "clear", "copy"))
    # comparisons, merges and text read every item: refused where the model's code makes them
    __eq__, __ne__, __or__, __ror__, __reversed__ = (
        _read_from_user(n) for n in ("__eq__", "__ne__", "__or__", "__ror__", "__reversed__"))
    __repr__, __str__, __format__ = (_read_from_user(n) for n in ("__repr__", "__str__",
                                                                  "__format__"))
    __hash__ = None  # a dict: unhashable, as before


@contextlib.contextmanager
def deferred_items(model, items: dict[str, tuple]) -> Iterator[None]:
    """While tracing, each dict at ``items`` (target -> (file:line, {key: how}, start))
    records its item changes; put back afterwards."""
    originals = [(t, current(model, t)) for t in items]
    try:
        for target, value in originals:
            location, keys, start = items[target]
            rebind(model, target, RecordingDict(target, value, keys, location, start))
        yield
    finally:
        for target, value in originals:
            rebind(model, target, value)
