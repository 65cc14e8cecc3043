"""Appends to a list attribute (``self.seen.append(v)``) are deferred to the epilogue: the
graph returns the value, and calling the program appends it where the model's forward does,
in the same order, only when its branch ran. What cannot be replayed is refused, with the
line."""

from __future__ import annotations

import copy

import hostile_models as hm
import pytest
import torch
from test_hostile import X, _assert_same_world, _examples, _line, _world

import stitch
from stitch.epilogue import ListTargets
from stitch.errors import ServeError, UnsupportedSideEffectError, VerificationError


def _same(got: list, want: list) -> None:
    assert len(got) == len(want), (got, want)
    for a, b in zip(got, want, strict=True):
        assert type(a) is type(b), (a, b)
        if isinstance(b, torch.Tensor):
            torch.testing.assert_close(a, b)
        else:
            assert a == b


def _exported(cls):
    torch.manual_seed(0)
    model = cls()
    before = _world(model)
    program = stitch.export(model, (X,), examples=_examples(model))
    _assert_same_world(before, model)  # the model's lists are as they were, too
    return model, program


def test_top_level_append_replays_into_the_models_list():
    model, program = _exported(hm.AttributeAppend)
    reference = copy.deepcopy(model)
    assert model.seen == []
    for (x,), _ in _examples(model):
        torch.testing.assert_close(program(x), reference(x))
    _same(model.seen, reference.seen)  # the program appended where the model's forward does
    [entry] = program.epilogue.entries
    assert (entry.kind, entry.options) == ("append", {"target": "seen"})
    assert entry.location == _line("self.seen.append")


def test_appends_in_branches_sizes_and_submodules_match_the_model():
    model, program = _exported(hm.AppendsEverywhere)
    assert program.report.graph_ops.get("cond") == 1
    assert program.epilogue.append_targets == ["seen", "inner.norms"]
    reference = copy.deepcopy(model)
    for (x,), _ in _examples(model):  # one input per side of the branch
        program(x)
        reference(x)
    _same(model.seen, reference.seen)
    _same(model.inner.norms, reference.inner.norms)
    assert isinstance(model.seen[0], int)  # a size stays a Python int


def test_unbound_targets_keep_the_values():
    model, program = _exported(hm.AttributeAppend)
    program.targets.bind(None)
    program(X)
    assert len(program.targets.lists["seen"]) == 1 and model.seen == []
    program.targets.bind(model)
    program(X)
    assert len(model.seen) == 1


def test_dropping_appends_fails_verification(monkeypatch):
    """The verifier compares what each side appended: an epilogue that loses them fails."""
    import sys

    from stitch.running import run_with_epilogue  # replays through its module's `replay`

    runner = sys.modules[run_with_epilogue.__module__]
    real = runner.replay

    def lossy(epilogue, outputs, printer=None, lists=None):
        return real(epilogue, outputs, printer, ListTargets())  # appends go nowhere

    monkeypatch.setattr(runner, "replay", lossy)
    torch.manual_seed(0)
    model = hm.AttributeAppend()
    with pytest.raises(VerificationError, match="appended to 'seen' differ"):
        stitch.export(model, (X,), examples=_examples(model))


REFUSED = [
    (hm.AppendsTuple, "appends a tuple", "self.seen.append((", "both"),
]


@pytest.mark.parametrize("cls, why, line_text, which", REFUSED,
                         ids=[c[0].__name__ for c in REFUSED])
def test_what_cannot_be_replayed_is_refused_with_the_line(cls, why, line_text, which):
    torch.manual_seed(0)
    model = cls()
    examples = _examples(model)
    if which == "first":  # only the side that never appends: the list never grew
        examples = examples[1:]
    before = _world(model)
    (x,), _ = examples[0]
    with pytest.raises(UnsupportedSideEffectError) as info:
        stitch.export(model, (x,), examples=examples[1:])
    message = str(info.value)
    assert why in message and _line(line_text).rsplit(":", 1)[1] in message, message
    _assert_same_world(before, model)


@pytest.mark.parametrize("cls, attribute", [(hm.ExtendsList, "seen"),
                                             (hm.GlobalAppend, None)],
                         ids=["extend", "global-list"])
def test_extend_and_global_lists_are_deferred(cls, attribute):
    """``self.seen.extend([...])`` is one append per item; a module global list (HISTORY)
    is appended to by the program as by the model, values included."""
    torch.manual_seed(0)
    model = cls()
    program = stitch.export(model, (X,), examples=_examples(model))
    try:
        for (x,), _ in _examples(model):
            torch.set_grad_enabled(False)  # appended tensors stay leaves: copies of the model
            reference = copy.deepcopy(model)
            eager_list = getattr(reference, attribute) if attribute else hm.HISTORY
            n = len(eager_list)
            want = reference(x)
            eager_items = eager_list[n:]
            program_list = getattr(model, attribute) if attribute else hm.HISTORY
            n = len(program_list)
            got = program(x)
            torch.testing.assert_close(got, want)
            program_items = program_list[n:]
            assert len(program_items) == len(eager_items) == 1
            torch.testing.assert_close(torch.as_tensor(program_items[0]),
                                       torch.as_tensor(eager_items[0]))
    finally:
        torch.set_grad_enabled(True)
        hm.HISTORY.clear()


def test_strict_export_refuses_appends():
    torch.manual_seed(0)
    model = hm.AttributeAppend()
    with pytest.raises(UnsupportedSideEffectError, match="strict=True cannot defer appends"):
        stitch.export(model, (X,), strict=True)


@pytest.mark.slow
def test_saved_artifact_keeps_appends_and_a_server_refuses_them(tmp_path):
    model, program = _exported(hm.AttributeAppend)
    path = program.save(str(tmp_path / "appends.pt2"))
    loaded = stitch.load(path)
    reference = copy.deepcopy(model)
    torch.testing.assert_close(loaded(X), reference(X))
    _same(loaded.targets.lists["seen"], reference.seen)
    from stitch.serve.runner import RequestRunner

    with pytest.raises(ServeError, match="appends to list attribute"):
        RequestRunner(loaded, spec=None)


def test_a_forward_reading_back_its_list_is_refused():
    """Refused where the forward reads the list, not left to verification, which only a
    read that changes the examples' outputs reaches."""
    torch.manual_seed(0)
    model = hm.ReadsBackItsList()
    with pytest.raises(UnsupportedSideEffectError, match="reads list 'seen'"):
        stitch.export(model, (X,), examples=[((X * 2,), {})])
    assert model.seen == []


@pytest.mark.parametrize("cls, attribute", [(hm.AppendOnlyInBranch, "seen"),
                                             (hm.GlobalAppendInBranch, None)],
                         ids=["model-list", "global-list"])
def test_an_append_in_a_branch_no_example_took_goes_where_the_forward_keeps_the_list(
        cls, attribute):
    """The list never grew on the examples, so no recording stood in for it: the trace
    names it by where the forward keeps it (a model attribute's path, a module global),
    and the program appends there when that side runs, as the model does."""
    torch.manual_seed(0)
    model = cls()
    (pos,), _ = _examples(model)[0]
    program = stitch.export(model, (-pos,), examples=[((-pos * 2,), {})])
    try:
        for x in (pos, -pos, pos * 3):
            reference = copy.deepcopy(model)
            eager_list = getattr(reference, attribute) if attribute else hm.HISTORY
            n = len(eager_list)
            with torch.no_grad():  # appended tensors stay leaves: the model copies
                want = reference(x)
            eager_items = eager_list[n:]
            program_list = getattr(model, attribute) if attribute else hm.HISTORY
            n = len(program_list)
            with torch.no_grad():
                got = program(x)
            torch.testing.assert_close(got, want)
            _same(program_list[n:], eager_items)
    finally:
        hm.HISTORY.clear()


class AppendsToAListInADict(torch.nn.Module):
    """Another container: the list lives in a dict attribute, which stitch does not name
    as an append target. A branch no example took cannot be deferred: refused, not lost."""

    def __init__(self) -> None:
        super().__init__()
        self.logs = {"a": []}

    def forward(self, x):
        if x.sum() > 100:
            self.logs["a"].append(x.max())
        return x * 2


def test_an_append_to_a_list_stitch_cannot_name_is_refused_not_lost():
    x = torch.ones(4)
    with pytest.raises(stitch.StitchError, match="could only be specialised"):
        stitch.export(AppendsToAListInADict(), (x,), examples=[((-x,), {})])


NAN_LOG = []


class AppendsARead(torch.nn.Module):
    def forward(self, x):
        h = x * 1.5
        if torch.isnan(h).any():
            NAN_LOG.append(h.min().item())  # a NaN read: the same NaN on both sides
            return h.nan_to_num()
        return h - 1.0


def test_an_appended_nan_is_the_same_value_as_the_models():
    """Verification compares appended floats as the outputs are compared: NaN equals NaN
    (by Python's ``nan != nan`` the example that takes the branch would differ)."""
    nan = torch.randn(4, 8)
    nan[0, 0] = float("nan")
    program = stitch.export(AppendsARead(), (torch.randn(4, 8),), examples=[((nan,), {})])
    NAN_LOG.clear()
    program(nan)
    assert len(NAN_LOG) == 1 and NAN_LOG[0] != NAN_LOG[0]
    NAN_LOG.clear()
