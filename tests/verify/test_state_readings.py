"""Python state verification reads each slot three times per comparison where the model's
run leaves it alone (before, after the model, after the program) and a fourth time only
where the model changed it (after ``restore``, to tell state stitch can put back from
state it cannot); readings stay as strong as before: a change to an object of a package
read by identity (``logging``) is no change, a change to a user object's attribute or a
plain container's item is one, whichever types were met first."""

from __future__ import annotations

import collections
import logging
import types

import pytest
import torch

from capture.reachable import Slot, SlotKind
from stitch.errors import VerificationError
from stitch.verify import state


def _slots(**values) -> tuple[dict, list[Slot]]:
    namespace = dict(values, __name__="fake")
    return namespace, [Slot(SlotKind.GLOBAL, "fake", name, namespace) for name in values]


def _counting(monkeypatch) -> collections.Counter:
    """How often each value was read at the top (a slot's value, not its items)."""
    reads: collections.Counter = collections.Counter()
    value = state._value

    def counted(v, depth=0):
        if depth == 0:
            reads[id(v)] += 1
        return value(v, depth)

    monkeypatch.setattr(state, "_value", counted)
    return reads


def test_a_slot_the_model_leaves_alone_is_read_three_times(monkeypatch):
    namespace, slots = _slots(kept=[1, 2], moved=[3])
    kept, moved = namespace["kept"], namespace["moved"]
    reads = _counting(monkeypatch)
    _, _, check = state.compared(slots, lambda: moved.append(4), lambda: moved.append(4))
    check("example 0")
    assert reads[id(kept)] == 3
    assert reads[id(moved)] == 4  # after restore too: it could not be put back otherwise


def test_state_the_model_changes_and_restore_cannot_put_back_is_still_refused():
    steps = iter(range(10))
    _, slots = _slots(steps=steps, other=[1])
    _, _, check = state.compared(slots, lambda: next(steps), lambda: None)
    with pytest.raises(VerificationError, match="can neither put back nor replay"):
        check("example 0")


def test_a_difference_after_the_two_runs_is_still_refused():
    namespace, slots = _slots(seen=[], other={"a": 1})
    _, _, check = state.compared(slots, lambda: namespace["seen"].append(1), lambda: None)
    with pytest.raises(VerificationError, match=r"fake\.seen differs after the call"):
        check("example 0")


def test_a_model_result_that_asks_for_no_program_run_puts_the_slots_back():
    namespace, slots = _slots(seen=[])
    ran = []
    expected, actual, check = state.compared(
        slots, lambda: namespace["seen"].append(1) or "refused", lambda: ran.append(1),
        wanted=lambda result: result != "refused")
    assert (expected, actual, check) == ("refused", None, None)
    assert namespace["seen"] == [] and not ran


def test_objects_of_a_package_read_by_identity_change_nothing_after_a_user_object():
    logger = logging.getLogger("tests.verify.readings")
    record = types.SimpleNamespace(n=0, log=logger)
    before = state.read(_slots(logger=logger, record=record)[1])
    logger.spare = 1  # a library object's own attribute: read by identity
    record.n = 1  # a user object's attribute: read by value
    after = state.read(_slots(logger=logger, record=record)[1])
    assert state._same(before[0], after[0], 0, 0)
    assert not state._same(before[1], after[1], 0, 0)
    del logger.spare


@pytest.mark.parametrize("change", [
    lambda d: d["inner"].append(3),  # an item of a list in a dict
    lambda d: d.__setitem__("n", 2),  # a number in a dict
    lambda d: d["obj"].__setattr__("x", torch.ones(2)),  # a tensor attribute of a record
    lambda d: d["obj"].x.add_(1),  # the tensor written in place
])
def test_a_change_inside_a_container_is_seen(change):
    held = {"inner": [1, 2], "n": 1, "obj": types.SimpleNamespace(x=torch.zeros(2)),
            "log": logging.getLogger("tests.verify.readings")}
    _, slots = _slots(held=held)
    before = state.read(slots)
    change(held)
    assert not state._same(before[0], state.read(slots)[0], 0, 0)


def test_a_module_the_warnings_machinery_marks_is_no_change_but_its_own_attributes_are():
    """The first warning a module's line raises puts ``__warningregistry__`` on that module,
    on whichever of the two compared runs raises it first (a torch warning the comparison
    leaves out too): Python's record, not the model's state. Any other attribute the
    program's run alone sets on the module is still a difference."""
    holder = types.ModuleType("models_module")
    holder.scale = 2
    _, slots = _slots(helpers=holder)
    _, _, check = state.compared(
        slots, lambda: None, lambda: setattr(holder, "__warningregistry__", {"version": 1}))
    check("example 0")
    del holder.__warningregistry__
    _, _, check = state.compared(slots, lambda: None, lambda: setattr(holder, "scale", 3))
    with pytest.raises(VerificationError, match=r"fake\.helpers"):
        check("example 0")
