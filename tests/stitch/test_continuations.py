"""A flag read once, names bound only under ``if flag:`` and used under later ``if flag:``
blocks (Longformer's global attention): the first ``if`` takes the rest of the function as
each branch's continuation with the flag fixed there, so nothing is guarded."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import stitch
from stitch.plan import Action


class FlagContinuation(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        flag = (x > 2).any()
        h = self.lin(x)
        if flag:
            idx = (x > 2).nonzero(as_tuple=True)  # a data-dependent shape, like Longformer's
            extra = x[idx].sum()
        h = h * 2
        if flag:
            h = h + extra
        if not flag:
            h = h - 1
        scale = 3.0 if flag else 0.5
        return h * scale


class FlagRebound(FlagContinuation):
    """The flag changes after the ``if``: its value is not known in the rest, no
    continuation (the names bound on one side only leave the ``if`` guarded)."""

    def forward(self, x):
        flag = (x > 2).any()
        h = self.lin(x)
        if flag:
            extra = x.sum()
        flag = flag & (x.sum() >= 0)  # the same value here, but stitch cannot know
        if flag:
            h = h + extra
        return h


def _inputs():
    torch.manual_seed(0)
    x = torch.rand(4, 8)  # nothing above 2: the false side
    hot = x.clone()
    hot[1, 3] = 5.0  # the true side
    return x, hot


@pytest.fixture(scope="module", params=[False, True], ids=["non-strict", "strict"])
def exported(request):
    torch.manual_seed(0)
    model = FlagContinuation()
    x, hot = _inputs()
    return model, stitch.export(model, (x,), examples=[((hot,), {})], strict=request.param)


def test_no_guard_one_cond_later_ifs_resolved(exported):
    _model, program = exported
    report = program.report
    assert not [d for d in report.decisions if d.action == Action.GUARD], str(report)
    first = [d for d in report.decisions if "bound on one branch only" in d.reason]
    assert len(first) == 1 and first[0].reason.startswith("`extra` bound"), str(report)
    resolved = [d for d in report.decisions if d.reason.startswith("same flag `flag`")]
    lines = sorted(int(d.location.rsplit(":", 1)[1]) for d in resolved)
    assert len(lines) == 3, str(report)  # `if flag`, `if not flag`, `3.0 if flag else 0.5`
    assert report.graph_ops.get("cond") == 1 and report.breaks_after == 0
    assert all(c.note == "" for c in report.checks), str(report)  # both sides verified


def test_matches_eager_on_both_sides_and_new_inputs(exported):
    model, program = exported
    x, hot = _inputs()
    hotter = hot.clone()
    hotter[:, 0] = 9.0  # four values above 2: another data-dependent size
    for inp in (x, hot, hotter, torch.rand(4, 8) * 0.1):
        with torch.no_grad():
            torch.testing.assert_close(program(inp), model(inp))


def test_a_rebound_flag_gets_no_continuation():
    torch.manual_seed(0)
    model = FlagRebound()
    x, hot = _inputs()
    program = stitch.export(model, (x,), examples=[((hot,), {})],
                            settings=stitch.Settings(allow_guards=True))
    decisions = program.report.decisions
    assert not any("continuation" in d.reason for d in decisions), str(program.report)
    guarded = [d for d in decisions if d.action == Action.GUARD]
    assert guarded, str(program.report)
    with torch.no_grad():
        torch.testing.assert_close(program(x), model(x))
    with pytest.raises(stitch.SpecializationError):
        program(hot)


class ReturnThenConditional(nn.Module):
    """An early return, then conditional expressions on a tensor flag in the rest: the rest
    becomes the false arm of the return's cond, and the expressions there are rewritten
    too, each a cond of its own inside the arm (left as written, the arm fails to trace:
    "Data-dependent branching", guarded)."""

    def forward(self, x):
        h = torch.sigmoid(x) - 0.5
        if h.sum() > 0:
            return h * 2.0
        flag = h.mean() > -0.1
        h = h * (1.5 if flag else 0.5)  # a number: known from an example that got here
        return h + 1 if flag else h - 1  # tensors: found by tracing the arm


class ReturnThenTensorExpression(nn.Module):
    """As above with only the tensor expression: no example need reach it."""

    def forward(self, x):
        h = torch.sigmoid(x) - 0.5
        if h.sum() > 0:
            return h * 2.0
        flag = h.mean() > -0.1
        return h + 1 if flag else h - 1


@pytest.mark.parametrize("model, reaches_rest", [(ReturnThenConditional(), True),
                                                 (ReturnThenTensorExpression(), False)])
def test_conditional_expressions_in_a_continuation_arm_become_conds(model, reaches_rest):
    x = torch.arange(1.0, 33.0).reshape(4, 8) / 10
    second = -x if reaches_rest else x * 2
    program = stitch.export(model, (x,), examples=[((second,), {})])
    assert not program.report.guards
    for inp in (x, -x, x - x.mean(), torch.zeros(4, 8), -x * 0.01):
        torch.testing.assert_close(program(inp), model(inp))


def test_a_flag_fixed_in_the_continuation_is_forced_in_the_rewrite_and_named():
    """One example (the false side): forcing the first ``if flag:`` fixes ``flag`` in all
    the later tests of its continuation, which forcing the model's one test would not do;
    that side is checked against the rewrite, and the report says so."""
    torch.manual_seed(0)
    model = FlagContinuation()
    x, hot = _inputs()
    program = stitch.export(model, (x,))
    notes = [n for n in program.report.notes if n.startswith("checked against stitch's rewrite")]
    assert len(notes) == 1, program.report.notes
    for inp in (x, hot):
        with torch.no_grad():
            torch.testing.assert_close(program(inp), model(inp))
