"""allow_partial=True: the fewest graphs stitch can reach, verified, with what is left."""

from __future__ import annotations

import pytest
import torch

import stitch


class BranchThenNonzero(torch.nn.Module):
    """One fixable break (a branch), one stitch cannot fix (nonzero feeding a Python loop)."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.b = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = torch.tanh(self.a(x))
        if h.mean() > 0:
            h = self.b(h)
        else:
            h = -h
        total = h.sum() * 0
        for idx in (h > 0.5).nonzero():
            total = total + h[idx[0], idx[1]]
        return h, total


def _inputs():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 8, generator=g)
    return (x * 0 + 5,), [((x * 0 - 5,), {})]


def test_partial_program_runs_fewer_graphs_and_matches_eager():
    torch.manual_seed(0)
    model = BranchThenNonzero().eval()
    args, examples = _inputs()
    with pytest.raises(stitch.UnfixableBreaksError):
        stitch.export(model, args, examples=examples)
    program = stitch.export(model, args, examples=examples, allow_partial=True)
    assert isinstance(program, stitch.PartialProgram)
    report = program.report
    kinds = {s.kind.value for s in report.remaining}
    # the loop over nonzero(): its header is a count from data (a loop site, with scalar
    # reads captured), or the nonzero op itself
    assert kinds & {"dynamic_shape", "loop"}
    assert kinds <= {"dynamic_shape", "loop", "unsupported_call"}
    assert report.graphs_after < report.graphs_before, str(report)
    assert any(d.action.value == "torch.cond" for d in report.decisions)
    assert "partial:" in str(report)
    for a, k in [(args, {})] + examples:
        with torch.no_grad():
            got, want = program(*a, **k), model(*a, **k)
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g, w)
    with pytest.raises(stitch.StitchError, match="cannot be saved"):
        program.save("x.pt2")
    # between calls the user's class is untouched
    assert BranchThenNonzero.forward.__code__.co_filename == __file__
