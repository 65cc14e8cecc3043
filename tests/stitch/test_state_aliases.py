"""Python state the forward changes and reads where a program would be wrong on later
calls: a deferred list compared or printed whole, a module global's list the model also
holds as an attribute, a class counter a subclass inherits, and a float counter added to in
a branch and at the top level. Each is refused, naming what it found; the user's classes are
left as they were."""

from __future__ import annotations

import pytest
import torch
from test_state_reads import CappedHistory as Hist
from test_state_reads import _neg, _pos

import stitch

SHARED_LOG: list = []


class ComparesItsHistory(Hist):
    def forward(self, x):
        fresh = self.hist == []  # before: frozen at the traced contents (True)
        if x.sum() > 0:  # no example takes it: the only append
            self.hist.append(1)
        return x + (1 if fresh else 0)


class PrintsItsHistory(Hist):
    def forward(self, x):
        print(f"h={self.hist}")  # before: `h=[]` on every call
        if x.sum() > 0:
            self.hist.append(x.shape[0])
        return x + 1


@pytest.mark.parametrize("model_type", [ComparesItsHistory, PrintsItsHistory])
def test_a_list_only_an_untaken_arm_appends_to_is_not_read_as_traced(model_type):
    with pytest.raises(stitch.UnsupportedSideEffectError, match="reads list 'hist'"):
        stitch.export(model_type(), (_neg(6),), examples=[((_neg(8),), {})])


class HoldsTheGlobalLog(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.log = SHARED_LOG  # the same list under a second name

    def forward(self, x):
        if x.sum() > 0:
            SHARED_LOG.append(x.shape[0])
        return x + len(self.log)


def test_a_global_list_the_model_also_holds_keeps_its_identity():
    """stitch's copies of the model shared no list with the module any more, so its runs
    read a list of their own and verification passed a program frozen at length 0."""
    SHARED_LOG.clear()
    with pytest.raises(stitch.StitchError):
        stitch.export(HoldsTheGlobalLog(), (_pos(6),), examples=[((_neg(8),), {})])
    assert SHARED_LOG == []


class AppendsThroughTheAttribute(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.log = SHARED_LOG

    def forward(self, x):
        if x.sum() > 0:
            self.log.append(x.shape[0])
        return x + 1


class AppendsThroughTheGlobal(AppendsThroughTheAttribute):
    def forward(self, x):
        SHARED_LOG.append(x.shape[0])
        return x + 1


@pytest.mark.parametrize("model_type", [AppendsThroughTheAttribute, AppendsThroughTheGlobal])
def test_a_global_list_the_model_also_holds_is_appended_to_once(model_type):
    """Appends alone, through either name, are replayed (the list is compared once, as
    appends, not again as a changed attribute or global)."""
    SHARED_LOG.clear()
    model = model_type()
    program = stitch.export(model, (_pos(6),), examples=[((_neg(8),), {})])
    calls = (_pos(3), _neg(2), _pos(5))
    for x in calls:
        model(x)
    want, SHARED_LOG[:] = list(SHARED_LOG), []
    for x in calls:
        program(x)
    assert SHARED_LOG == want and want
    SHARED_LOG.clear()


class CountsOnItsBase(torch.nn.Module):
    count = 0


class CountsOnItsClass(CountsOnItsBase):
    def forward(self, x):
        type(self).count += 1  # reads the base's, creates the subclass's own
        return x + 1


def test_a_class_counter_inherited_from_a_base_is_checked_and_left_as_it_was():
    """The export left ``count`` on the subclass, and the program never counted."""
    with pytest.raises(stitch.StitchError):
        stitch.export(CountsOnItsClass(), (_pos(6),), examples=[((_neg(8),), {})])
    assert "count" not in vars(CountsOnItsClass)
    assert CountsOnItsBase.count == 0


class AddsFloatsAroundABranch(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.t = 0.0

    def forward(self, x):
        self.t += 0.1
        if x.sum() > 0:
            self.t += 0.2
        self.t += 0.3
        return x + 1


class AddsIntsAroundABranch(AddsFloatsAroundABranch):
    def __init__(self) -> None:
        super().__init__()
        self.t = 0

    def forward(self, x):
        self.t += 1
        if x.sum() > 0:
            self.t += x.shape[0]
        self.t += 3
        return x + 1


def test_float_additions_in_a_branch_and_around_it_are_refused():
    """The epilogue replays the branch's additions apart: three calls left 1.8 where eager
    holds 1.8000000000000003."""
    with pytest.raises(stitch.UnsupportedSideEffectError, match="adds floats .*to 't'"):
        stitch.export(AddsFloatsAroundABranch(), (_pos(6),), examples=[((_neg(8),), {})])


class AddsFloatsInTheArmsThenAfter(AddsFloatsAroundABranch):
    def forward(self, x):
        if x.sum() > 0:
            self.t += 0.2
        else:
            self.t += 0.7
        self.t += 0.1  # after the branch: the epilogue's order is eager's
        return x + 1


def test_float_additions_in_the_arms_then_after_them_are_replayed_exactly():
    model = AddsFloatsInTheArmsThenAfter()
    program = stitch.export(model, (_pos(6),), examples=[((_neg(8),), {})])
    twin = AddsFloatsInTheArmsThenAfter()
    program.targets.bind(twin)
    for x in (_pos(3), _neg(2), _pos(5), _pos(1), _neg(4)):
        model(x), program(x)
    assert twin.t.hex() == model.t.hex()


def test_integer_additions_in_a_branch_and_around_it_are_replayed():
    model = AddsIntsAroundABranch()
    program = stitch.export(model, (_pos(6),), examples=[((_neg(8),), {})])
    twin = AddsIntsAroundABranch()
    program.targets.bind(twin)
    for x in (_pos(3), _neg(2), _pos(5)):
        model(x), program(x)
    assert twin.t == model.t == (1 + 3 + 3) + (1 + 3) + (1 + 5 + 3)


class AddsAFloatReadInTheBranch(AddsIntsAroundABranch):
    def forward(self, x):
        self.t += 1
        if x.sum() > 0:
            self.t += x.mean().item()  # a float added to an int counter in the branch
        self.t += 3
        return x + 1


def test_a_float_a_branch_adds_to_an_int_counter_is_refused():
    with pytest.raises(stitch.UnsupportedSideEffectError, match="'t'"):
        stitch.export(AddsAFloatReadInTheBranch(), (_pos(6),), examples=[((_neg(8),), {})])


class PrintsItsHistoryWhole(Hist):
    def forward(self, x):
        self.hist.append(x.shape[0])
        print(self.hist)  # the recorded text would be the traced list's
        return x + 1


def test_a_deferred_list_printed_whole_is_refused():
    with pytest.raises(stitch.UnsupportedSideEffectError, match="prints or logs list"):
        stitch.export(PrintsItsHistoryWhole(), (_pos(6),), examples=[((_pos(8),), {})])


class CapsTheGlobalLogThroughTheAttribute(HoldsTheGlobalLog):
    def forward(self, x):
        SHARED_LOG.append(x.shape[0])
        if len(self.log) > 100:  # never true on the examples: no output shows the read
            del SHARED_LOG[0]
        return x + 1


def test_a_global_list_read_through_a_model_attribute_is_refused_at_the_read():
    SHARED_LOG.clear()
    with pytest.raises(stitch.UnsupportedSideEffectError, match="reads list"):
        stitch.export(CapsTheGlobalLogThroughTheAttribute(), (_pos(6),),
                      examples=[((_pos(8),), {})])
    assert SHARED_LOG == []


class LogsInAnArmBesideALogList(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.log: list = []

    def forward(self, x):
        self.log.append(x.shape[0])
        if x.sum() > 0:
            y = torch.log(x)  # `log` is a deferred list's name too: no read of it
        else:
            y = x.exp()
        return y


def test_a_call_named_like_a_deferred_list_is_no_read():
    model = LogsInAnArmBesideALogList()
    program = stitch.export(model, (_pos(6),), examples=[((_neg(8),), {})])
    x = _pos(3)
    torch.testing.assert_close(program(x), model(x))
