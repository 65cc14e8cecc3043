"""A plain object held in a module global or a class attribute whose attributes the
forward changes (a counter or a last value in either) is found, located at
the statement that sets the attribute, and refused: the exported program would never set
it (a program that counts nothing)."""

from __future__ import annotations

import sys

import pytest
import torch

import stitch
from capture.reachable import preserved_slots, reachable_slots
from capture.side_state import find_mutations, preserved_globals


class Tracker:
    def __init__(self) -> None:
        self.n = 0
        self.last = None


TRACK = Tracker()
SETTINGS = Tracker()  # read, never changed: not state


class CountsInAGlobalObject(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x) + SETTINGS.n
        if h.sum() > 0:
            h = h + 1
        TRACK.last = h.max().item()
        TRACK.n = TRACK.n + 1
        return h


class CountsInAClassObject(CountsInAGlobalObject):
    tracker = Tracker()

    def forward(self, x):
        h = self.lin(x)
        type(self).tracker.n += 1
        return h


def _found(model, inputs):
    slots = reachable_slots(model)

    def run(after_each=None):
        for x in inputs:
            model(x)
            if after_each is not None:
                after_each()

    with preserved_globals([sys.modules[__name__]]), preserved_slots(slots), \
            torch.no_grad():
        return find_mutations(model, run, slots)


def test_a_global_objects_attributes_are_found_and_located():
    found = _found(CountsInAGlobalObject(), [torch.ones(2, 4), -torch.ones(2, 4)])
    assert [(m.kind, m.name) for m in found] == [("global", "TRACK")]
    assert found[0].location.endswith(f"{__file__}:37")  # TRACK.last = ...
    assert "'last', 'n' of the Tracker object" in found[0].note
    assert vars(TRACK) == {"n": 0, "last": None}  # put back


def test_a_class_attribute_objects_attributes_are_found_and_located():
    found = _found(CountsInAClassObject(), [torch.ones(2, 4), -torch.ones(2, 4)])
    assert [(m.kind, m.name) for m in found] == [("state", "tracker")]
    assert found[0].location.endswith(":47")  # type(self).tracker.n += 1
    assert CountsInAClassObject.tracker.n == 0


def test_export_refuses_naming_the_line_and_leaves_the_object_as_it_was():
    torch.manual_seed(0)
    x1, x2 = torch.ones(2, 4) * 3, -torch.ones(2, 4) * 5
    with pytest.raises(stitch.StitchError, match=r"test_object_attributes.py:37: forward "
                       r"mutates module global .*TRACK \(sets attribute\(s\) 'last', 'n'"):
        stitch.export(CountsInAGlobalObject().eval(), (x1,), examples=[((x2,), None)])
    assert vars(TRACK) == {"n": 0, "last": None}


class ReadsOnly(CountsInAGlobalObject):
    def forward(self, x):
        return self.lin(x) + SETTINGS.n


@pytest.mark.parametrize(("model", "passes"), [(ReadsOnly, 1), (CountsInAClassObject, 2)])
def test_the_examples_run_once_where_no_call_changed_anything(model, passes):
    """A second pass from the same state on the same examples reads what the first read."""
    slots = reachable_slots(model())
    made = []

    def run(after_each=None):
        made.append(1)
        for x in (torch.ones(2, 4), -torch.ones(2, 4)):
            instance(x)
            if after_each is not None:
                after_each()

    instance = model()
    with preserved_globals([sys.modules[__name__]]), preserved_slots(slots), \
            torch.no_grad():
        found = find_mutations(instance, run, slots)
    assert len(made) == passes and bool(found) == (passes == 2)
