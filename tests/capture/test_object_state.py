"""Analysis runs leave the user's Python state as it was: module globals and slots are put
back in place, to a bounded depth (nested containers, dict subclasses, plain objects'
attributes, a helper's mutable default argument), without calling overridden methods."""

from __future__ import annotations

import collections
import logging
import sys

import torch

from capture.object_state import put_back, record
from capture.reachable import Slot, SlotKind, preserved_slots
from capture.side_state import preserved_globals


class Tracker:
    def __init__(self) -> None:
        self.n = 0
        self.last = None


class Built(collections.OrderedDict):
    """A registry that builds on lookup (transformers' ACT2FN): never to be called."""

    def __getitem__(self, key):
        raise AssertionError("an overridden __getitem__ was called")

    def __iter__(self):
        raise AssertionError("an overridden __iter__ was called")


def remember(value, acc=[]):  # noqa: B006 - the mutable default under test
    acc.append(value)


COUNTS = collections.defaultdict(int)
TALLY = collections.Counter()
REG = {"a": [], "b": [{"n": 0}]}
TRACK = Tracker()
RECENT = collections.deque(maxlen=3)
BUILT = Built(relu=1)
LOG = logging.getLogger("stitch.tests.object_state")


def _mutate_everything() -> None:
    COUNTS["pos"] += 1
    TALLY["neg"] += 2
    REG["a"].append(torch.ones(1))
    REG["b"][0]["n"] += 1
    REG["b"].append({})
    TRACK.n += 1
    TRACK.last = 3.5
    TRACK.extra = "new"
    RECENT.append(1)
    dict.__setitem__(BUILT, "gelu", 2)
    remember(1)
    LOG.disabled = True


def test_globals_are_put_back_in_place_to_depth():
    inner, a_list = REG["b"][0], REG["a"]
    with preserved_globals([sys.modules[__name__]]):
        _mutate_everything()
    assert dict(COUNTS) == {} and dict(TALLY) == {}
    assert REG == {"a": [], "b": [{"n": 0}]}
    assert REG["b"][0] is inner and REG["a"] is a_list  # identities kept
    assert vars(TRACK) == {"n": 0, "last": None}
    assert list(RECENT) == [] and RECENT.maxlen == 3
    assert list(dict.items(BUILT)) == [("relu", 1)]
    assert remember.__defaults__[0] == []
    assert LOG.disabled is False


def test_globals_are_put_back_after_an_error():
    try:
        with preserved_globals([sys.modules[__name__]]):
            _mutate_everything()
            raise RuntimeError("refused")
    except RuntimeError:
        pass
    assert REG["b"][0]["n"] == 0 and TRACK.n == 0 and dict(COUNTS) == {}


def test_a_class_attribute_object_is_put_back_through_its_slot():
    class Model(torch.nn.Module):
        tracker = Tracker()
        seen = {"calls": [0]}

    slots = [Slot(SlotKind.CLASS, "Model", "tracker", Model),
             Slot(SlotKind.CLASS, "Model", "seen", Model)]
    with preserved_slots(slots):
        Model.tracker.n += 1
        Model.seen["calls"][0] += 1
        Model.seen["calls"].append(1)
    assert Model.tracker.n == 0 and Model.seen == {"calls": [0]}


def test_record_reads_no_overridden_method_and_restores_bytes():
    buffer = bytearray(b"ab")
    saved = record([BUILT, buffer])
    dict.__setitem__(BUILT, "x", 0)
    buffer[0:1] = b"z"
    put_back(saved)
    assert list(dict.items(BUILT)) == [("relu", 1)] and buffer == bytearray(b"ab")


def test_tensors_and_modules_are_not_contents():
    t, lin = torch.zeros(2), torch.nn.Linear(2, 2)
    saved = record([[t, lin]])
    assert [kind for _, kind, _ in saved] == ["list"]
