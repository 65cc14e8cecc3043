"""``from warnings import warn`` (any alias of the function itself) is a warning like
``warnings.warn``: found by the census, deferred at the top level and inside a branch, and
the module's binding is put back after export."""

from __future__ import annotations

import warnings
from warnings import warn as say

import pytest
import torch
from torch import nn

import stitch


class Says(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x)
        say("looked at the input", RuntimeWarning)  # noqa: B028 - as users write it
        if h.sum() > 0:
            say("positive sum")  # noqa: B028
            h = h * 2
        else:
            h = h - 1
        return h


def _warned(fn, x):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.no_grad():
            out = fn(x)
    return out, [(w.category, str(w.message)) for w in caught]


@pytest.fixture(scope="module")
def program():
    torch.manual_seed(0)
    return stitch.export(Says(), (torch.randn(2, 4),))


def test_aliased_warn_is_deferred_not_refused(program):
    fixed = {d.action.value for d in program.report.decisions}
    assert "epilogue" in fixed and program.report.graph_ops.get("cond") == 1
    assert [e.kind for e in program.epilogue.entries].count("warn") == 2
    assert say is warnings.warn  # the module's binding is back


def test_aliased_warn_replays_on_both_sides(program):
    torch.manual_seed(0)
    model = Says()
    for x in (torch.full((2, 4), 50.0), torch.full((2, 4), -50.0)):
        got, got_warned = _warned(program, x)
        want, want_warned = _warned(model, x)
        torch.testing.assert_close(got, want)
        assert got_warned == want_warned and want_warned
