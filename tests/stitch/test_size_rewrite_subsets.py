"""Size tests torch.export decided in one trace are rewritten together; where that export
fails and its error names none of them (a break inside a rewritten test's arm: kornia's
non-maxima suppression, whose window test's arm Dynamo cannot trace as a cond), each is
left out in turn and the first set that exports serves (stitch/size_rewrite.py). The test
left out keeps torch.export's guard, and the report says so."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import stitch
import stitch.size_rewrite as size_rewrite
from stitch.errors import ExportFailedError


class ShrinksByAFactor(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] > 4:  # both examples take this side: its guard serves them
            x = x * 2
        n = int(float(x.shape[-1]) / 1.5)  # float() of a size fixed it: the second example fails
        return F.interpolate(x[None], size=n, mode="linear")[0]


@pytest.fixture
def branch_rewrite_fails(monkeypatch):
    """The rewrite of the ``if`` fails to export, with an error that names no line."""
    real = size_rewrite.widened

    def widened(exported, again, *args, **kwargs):
        def failing(sites):
            if any("if x.shape[0] > 4" in s.source_line for s in sites):
                raise ExportFailedError("a break in an arm of the rewritten test")
            return again(sites)
        return real(exported, failing, *args, **kwargs)

    monkeypatch.setattr(size_rewrite, "widened", widened)
    import stitch.rewrite_export as rewrite_export
    monkeypatch.setattr(rewrite_export, "widened", widened)


def test_the_size_tests_that_export_are_served_when_another_ones_rewrite_fails(
        branch_rewrite_fails):
    model = ShrinksByAFactor()
    first, second = torch.randn(6, 12), torch.randn(8, 18)
    program = stitch.export(model, (first,), examples=[((second,), {})])
    for x in (first, second, torch.randn(7, 30)):
        torch.testing.assert_close(program(x), model(x))
    left = [n for n in program.report.notes if "its rewrite failed to export" in n]
    assert len(left) == 1 and "if x.shape[0] > 4:" in left[0], program.report.notes
