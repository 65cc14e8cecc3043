"""Python state a forward both changes (through what stitch replays after the graph) and
reads: the traced program would read the value it had when traced, never as the calls
change it. Refused: a read the model's code makes at run time (epilogue/record_lists.RecordingList)
and a read inside a cond arm, which torch.cond traces without any Python read
(synthesize/convert/arm_list_reads.py)."""

from __future__ import annotations

import pytest
import torch

import stitch

HISTORY: list = []
TOTAL = 0


def _pos(n):
    return torch.rand(n, 4) + 0.1


def _neg(n):
    return -torch.rand(n, 4) - 0.1


class CappedHistory(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.hist: list = []

    def forward(self, x):
        if x.sum() > 0:
            self.hist.append(x.shape[0])
        if len(self.hist) > 3:  # never true on the examples, each run from an empty list
            del self.hist[0]
        return x + 1


def test_a_list_the_forward_appends_to_and_reads_is_refused():
    """A program would never cap the history: after five calls the model holds [3, 4, 5],
    such a program [1, 2, 3, 4, 5]."""
    with pytest.raises(stitch.UnsupportedSideEffectError, match="reads list 'hist'"):
        stitch.export(CappedHistory(), (_pos(6),), examples=[((_neg(8),), {})])


LOG: list = []


def _trim(owner):
    if len(owner.hist) > 3:  # the read in a helper, on a receiver not named self
        owner.hist.pop(0)


class CappedGlobal(torch.nn.Module):
    def forward(self, x):
        LOG.append(x.shape[0])
        if len(LOG) > 3:
            del LOG[0]
        return x + 1


class CappedInAHelper(CappedHistory):
    def forward(self, x):
        self.hist.append(x.shape[0])
        _trim(self)
        return x + 1


class IteratesItsHistory(CappedHistory):
    def forward(self, x):
        self.hist.append(x.sum())
        return x + len(self.hist) + sum(h for h in self.hist[-2:]) * 0


@pytest.mark.parametrize("model_type", [CappedGlobal, CappedInAHelper, IteratesItsHistory])
def test_a_list_read_written_otherwise_is_refused(model_type):
    """A module global, a helper's receiver, an iteration and a slice: refused, never a
    program that reads the list as traced."""
    with pytest.raises(stitch.UnsupportedSideEffectError):
        stitch.export(model_type(), (_pos(6),), examples=[((_pos(8),), {})])


class PopsAGlobalInTheOtherArm(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            HISTORY.append(x.shape[0])
        elif HISTORY:  # read inside the arm torch.cond traces: found in the source
            HISTORY.pop()
        return x + 1


class CountsOrResetsAGlobal(torch.nn.Module):
    def forward(self, x):
        global TOTAL
        if x.sum() > 0:
            TOTAL += x.shape[0]
        else:
            TOTAL = 0
        return x + 1


class ReadsItsHistoryInAnArm(CappedHistory):
    def forward(self, x):
        self.hist.append(x.shape[0])  # deferred, at the top level
        if x.sum() > 0:
            y = x * 2
            if len(self.hist) > 3:  # decided while traced: never true on the examples
                y = y + 1
        else:
            y = x - 1
        return y


@pytest.mark.parametrize("model_type", [PopsAGlobalInTheOtherArm, ReadsItsHistoryInAnArm])
def test_a_deferred_list_read_in_an_arm_names_the_read(model_type):
    """No cond whose arm reads the list as traced: the refusal names the read's line. With
    guards the branch is specialised and refused all the same (the read at the top level,
    or verification: never a program that reads the list as traced)."""
    with pytest.raises(stitch.StitchError, match=r"uses list `(HISTORY|self\.hist)` other "
                                                 r"than by append"):
        stitch.export(model_type(), (_pos(6),), examples=[((_neg(8),), {})])
    with pytest.raises(stitch.StitchError):
        stitch.export(model_type(), (_pos(6),), examples=[((_neg(8),), {})],
                      settings=stitch.Settings(allow_guards=True))


class ReadsItsHistoryInALoop(CappedHistory):
    def forward(self, x):
        self.hist.append(x.shape[0])
        i, y = torch.zeros((), dtype=torch.long), x.clone()
        while i < (x > 0).sum():  # a while_loop: its body traced like an arm
            y = y + len(self.hist)
            i = i + 1
        return y


def test_a_deferred_list_read_in_a_loop_body_names_the_read():
    with pytest.raises(stitch.StitchError, match=r"loop body uses list `self\.hist`"):
        stitch.export(ReadsItsHistoryInALoop(), (_pos(2),), examples=[((_pos(3) - 0.5,), {})])


def _replays_like_the_model(model, reset, read, inputs) -> bool:
    program = stitch.export(model, (_pos(6),), examples=[((_neg(8),), {})])
    reset()
    for x in inputs:
        model(x)
    want = read()
    reset()
    for x in inputs:
        program(x)
    return read() == want


def test_a_global_list_read_in_an_arm_is_refused_or_replayed():
    try:
        same = _replays_like_the_model(PopsAGlobalInTheOtherArm(), HISTORY.clear,
                                       lambda: list(HISTORY), [_pos(5), _pos(6), _neg(3)])
    except stitch.StitchError:
        return
    assert same


def test_a_global_counter_reset_in_the_other_arm_is_refused_or_replayed():
    class Warm(torch.nn.Module):
        def forward(self, x):
            return x - 1

    stitch.export(Warm(), (_pos(6),), examples=[((_pos(8),), {})])

    def reset():
        global TOTAL
        TOTAL = 0

    try:
        same = _replays_like_the_model(CountsOrResetsAGlobal(), reset, lambda: TOTAL,
                                       [_pos(5), _pos(6), _neg(3), _pos(2), _pos(7)])
    except stitch.StitchError:
        return
    assert same


class PopsItsClassList(torch.nn.Module):
    seen: list = []

    def forward(self, x):
        if x.sum() > 0:
            type(self).seen.append(x.shape[0])  # a class list, through type(self)
        elif type(self).seen:
            type(self).seen.pop()
        return x + 1


def test_a_class_list_read_in_an_arm_through_type_self_is_refused():
    """The receiver written otherwise than ``self.x`` or a global name."""
    with pytest.raises(stitch.StitchError, match="seen"):
        stitch.export(PopsItsClassList(), (_pos(6),), examples=[((_neg(8),), {})])
    assert PopsItsClassList.seen == []
