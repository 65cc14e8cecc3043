"""Side effects in a branch that returns early: deferred like any branch effect, replayed
exactly when their branch ran and the call was reached before the branch returned."""

from __future__ import annotations

import contextlib
import io
import logging

import pytest
import torch
from torch import nn

import stitch

log = logging.getLogger("stitch.tests.branch_effects")


class ReturnsEarly(nn.Module):
    def __init__(self, skip: bool) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.skip = skip  # a Python flag: when set, the branch returns before its print

    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0:
            log.warning("positive sum %s", h.sum())
            if self.skip:
                return h
            print("early", h.max())
            return h * 2
        print("late", h.min())
        return h - 1


def _said(fn, x, caplog):
    out = io.StringIO()
    caplog.clear()
    with contextlib.redirect_stdout(out), torch.no_grad(), \
            caplog.at_level(logging.WARNING, logger=log.name):
        result = fn(x)
    return result, out.getvalue(), [r.getMessage() for r in caplog.records]


@pytest.mark.parametrize("skip", [False, True])
def test_early_return_branch_with_print_and_log_is_one_graph_matching_the_model(skip, caplog):
    torch.manual_seed(0)
    model = ReturnsEarly(skip).eval()
    x = torch.randn(2, 8)
    sign = 1 if model.lin(x).sum() > 0 else -1
    pos, neg = x * sign * 4, -x * sign * 4
    assert model.lin(pos).sum() > 0 > model.lin(neg).sum()
    program = stitch.export(model, (neg,), examples=[((pos,), {})])
    assert program.report.graph_ops.get("cond") == 1
    assert program.report.breaks_after == 0
    decision = next(d for d in program.report.decisions if d.action == "torch.cond")
    assert "early return" in decision.reason and "deferred to the epilogue" in decision.reason
    for inp in (pos, neg):
        got, got_out, got_logs = _said(program, inp, caplog)
        want, want_out, want_logs = _said(model, inp, caplog)
        torch.testing.assert_close(got, want)
        assert (got_out, got_logs) == (want_out, want_logs)
        assert want_out or want_logs  # each side says something
    _, out, _ = _said(program, pos, caplog)
    assert ("early" in out) is (not skip)
