"""Helpers with side effects called in a data-dependent branch: the call is logged in the
branch and the helper is called by the epilogue when its branch ran (with the arguments'
values at the call); where it cannot be replayed by name, stitch refuses and says why."""

from __future__ import annotations

import contextlib
import io
import json

import pytest
import torch

import stitch
from stitch.epilogue import Epilogue
from stitch.synthesize.convert.helper_effects import effect_helpers
from stitch.synthesize.operators.rt_effect_options import effect_options
from stitch.synthesize.operators.rt_helper_calls import helper_options


def _recorder():
    kept: list = []  # reachable only through record's closure cell

    def record(value):
        kept.append(value)

    record.kept = kept  # for the test's eyes only
    return record


record = _recorder()


def announce(label, value):
    print(label, f"{float(value):.4f}")


def report_twice(value):  # a helper reaching a helper with the effect
    announce("twice", value)
    announce("again", value * 2)


def scale(value):  # no effect: Dynamo traces it inside the cond as before
    return value * 2


class Base(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)


class HelpersInBranches(Base):
    def forward(self, x):
        h = self.lin(x)
        if h.mean() > 0:
            record(h.max())
            announce("positive", h.mean())
            h = scale(h)
        else:
            report_twice(h.min())
            h = h - 1
        record(h.sum())  # outside the branch, as before
        return h


class PassesItself(Base):
    def forward(self, x):
        h = self.lin(x)
        if h.mean() > 0:
            record(self)  # the epilogue holds tensors and plain values, not modules
        return h


def _sides(model):
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    pos = x if model.lin(x).mean() > 0 else -x
    return pos, -pos


def _run(fn, x):
    out = io.StringIO()
    size = len(record.kept)
    with contextlib.redirect_stdout(out), torch.no_grad():
        value = fn(x)
    return value, out.getvalue(), record.kept[size:]


def test_helper_finder_keeps_helpers_with_effects_only():
    found = effect_helpers(HelpersInBranches.forward)
    assert found == {"record", "announce", "report_twice"}  # not scale


def test_helpers_with_effects_in_branches_are_replayed_when_their_branch_ran():
    torch.manual_seed(0)
    model = HelpersInBranches()
    pos, neg = _sides(model)
    program = stitch.export(model, (pos,), examples=[((neg,), {})])
    assert program.report.graph_ops.get("cond") == 1, str(program.report)
    assert record.kept == []  # stitch.export left the closure's list as it found it
    for x in (pos, neg, pos * 0.5, neg * 3):
        want, want_text, want_kept = _run(model, x)
        got, got_text, got_kept = _run(program, x)
        torch.testing.assert_close(got, want)
        assert got_text == want_text and want_text
        assert len(got_kept) == len(want_kept)
        for a, b in zip(got_kept, want_kept, strict=True):
            torch.testing.assert_close(a, b)
    # as a saved artifact keeps it: JSON, the helper named by module and name
    saved = json.loads(json.dumps(program.epilogue.to_json()))
    calls = [e for e in saved["entries"] if e["kind"] == "call"]
    assert {e["options"]["name"] for e in calls} == {"record", "announce", "report_twice"}
    loaded = stitch.StitchedProgram(program.exported_program, Epilogue.from_json(saved))
    loaded.targets = program.targets
    for x in (pos, neg):
        assert _run(loaded, x)[1] == _run(model, x)[1]
    record.kept.clear()


def test_a_helper_the_epilogue_cannot_reach_by_name_is_refused_naming_it():
    """The epilogue calls a helper by module and name: a function that name does not reach
    (a closure variable of the forward, a local) is refused where the call is recorded."""
    def note(value):
        print("note", value)

    options = effect_options("call", function=note, name="note", module=__name__)
    with pytest.raises(stitch.UnsupportedSideEffectError,
                       match=r"m.py:3: helper 'note'.*not the module global .*\.note"):
        helper_options(options, (torch.ones(()),), "m.py:3")
    options = effect_options("call", function=record, name="record", module=__name__)
    assert helper_options(options, (torch.ones(()),), "m.py:3") == {
        "module": __name__, "name": "record"}  # JSON: what a saved artifact keeps


def test_a_helper_given_a_module_is_refused_naming_the_argument():
    torch.manual_seed(0)
    model = PassesItself()
    pos, neg = _sides(model)
    with pytest.raises(stitch.StitchError, match=r"with a PassesItself argument"):
        stitch.export(model, (pos,), examples=[((neg,), {})])
    assert record.kept == []
