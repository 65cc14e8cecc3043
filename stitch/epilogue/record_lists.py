"""A list attribute's appends, recorded while the model is traced::

    self.hist.append(h.mean())   ->  an ``append`` entry: the graph returns the value, the
                                     epilogue appends it

The list is replaced, for the trace, by a ``RecordingList``: ``append`` and ``extend`` are
recorded; any other change, and any read by the model's code (its length, an item, its text),
fails the export naming the line, because the epilogue replays appends only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from capture.owners import owner_at, state_owners

from ..errors import UnsupportedSideEffectError
from .entries import JSON_TYPES, Entry
from .stand_ins import caller, current_recorder, refused_read, where
from .targets import SHARED, is_shared


def _list_read(name: str):
    return refused_read(list, name, (
        "the forward reads list {!r} (its length, an item, its truth, a comparison, its "
        "text), whose appends stitch replays after the graph: the program would read the "
        "list as it was when traced, never as the calls grow it (a history capped by `if "
        "len(...) > n:` would never be capped). Keep the state in a buffer, or return what "
        "the forward reads."))


class RecordingList(list):
    """Stands in for a list attribute while the model is traced: ``append`` becomes an
    epilogue entry (the value a graph output); any other change is refused, naming the
    line, because the epilogue replays appends only."""

    def __init__(self, target: str, items: list) -> None:
        super().__init__(items)
        self.target = target
        self.original = items  # the list it stands in for

    def append(self, value: Any) -> None:
        self._record(value, caller())

    def extend(self, values) -> None:
        """One append entry per item, in order: the same list afterwards."""
        frame = caller()
        for value in list(values):
            self._record(value, frame)

    def _record(self, value: Any, frame) -> None:
        recorder = current_recorder()
        if recorder is None:
            raise UnsupportedSideEffectError(f"{where(frame)}: append to {self.target!r} "
                                             "outside stitch's export")
        if not isinstance(value, (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool,
                                  *JSON_TYPES)):
            raise UnsupportedSideEffectError(
                f"{where(frame)}: the forward appends a {type(value).__name__} to "
                f"{self.target!r}; stitch defers appends of one tensor or plain value "
                "(int, float, bool, str, None). Append the tensors one by one, or return them.")
        recorder.entries.append(Entry("append", where(frame), (recorder.arg(value, False),),
                                      {"target": self.target}))

    def _refuse(self, *args, **kwargs):
        frame = caller()
        raise UnsupportedSideEffectError(
            f"{where(frame)}: the forward changes list {self.target!r} other than by append "
            "or extend; stitch defers those only. Use append, or keep the state in a buffer.")

    insert = pop = remove = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse

    __len__, __getitem__, __iter__ = (_list_read(n) for n in ("__len__", "__getitem__",
                                                               "__iter__"))
    __contains__, __reversed__ = _list_read("__contains__"), _list_read("__reversed__")
    index, count, copy = _list_read("index"), _list_read("count"), _list_read("copy")
    # comparisons, concatenation, text: reads too (`self.hist == []`, `len(self.hist + [])`,
    # `f"{self.hist}"` would be frozen at the traced contents)
    __eq__, __ne__, __lt__, __le__, __gt__, __ge__ = (
        _list_read(n) for n in ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"))
    __add__, __mul__, __rmul__ = (_list_read(n) for n in ("__add__", "__mul__", "__rmul__"))
    __repr__, __str__, __format__ = (_list_read(n) for n in ("__repr__", "__str__",
                                                             "__format__"))
    __hash__ = None  # a list: unhashable, as before


def _stand_ins(model: torch.nn.Module, targets: list[str]):
    """(target, its stand-in) for each target now held by a RecordingList."""
    for target in targets:
        if is_shared(target):
            value = SHARED[target].get()
        else:
            path, _, attr = target.rpartition(".")
            value = getattr(owner_at(model, path), attr, None)
        if isinstance(value, RecordingList):
            yield target, value


@contextlib.contextmanager
def deferred_appends(model: torch.nn.Module, targets: list[str]) -> Iterator[None]:
    """While tracing, the lists at ``targets`` (paths in ``model``, or shared slots: class
    attributes, module globals, closure cells) record their appends into the current
    recorder instead of growing; put back afterwards."""
    swapped = []
    try:
        for target in targets:
            if is_shared(target):  # on the class, a module global, a closure cell
                slot = SHARED[target]
                original = slot.get()
                swapped.append((slot.set, original))
                slot.set(RecordingList(target, original))
                continue
            path, _, attr = target.rpartition(".")
            owner = owner_at(model, path)
            original = getattr(owner, attr)
            swapped.append((lambda v, o=owner, a=attr: object.__setattr__(o, a, v), original))
            object.__setattr__(owner, attr, RecordingList(target, original))
        for _target, stand_in in _stand_ins(model, targets):
            # the same list under another attribute (``self.log = LOG``): its reads are
            # the stand-in's too (`len(self.log)` would read the list as traced)
            for _path, holder in state_owners(model):
                for attr, value in list(vars(holder).items()):
                    if value is stand_in.original and value is not stand_in:
                        swapped.append((lambda v, o=holder, a=attr:
                                        object.__setattr__(o, a, v), value))
                        object.__setattr__(holder, attr, stand_in)
        yield
    finally:
        for put_back, original in reversed(swapped):
            put_back(original)
