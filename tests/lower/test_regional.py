"""Regional lowering: where Inductor cannot compile the whole graph (an ``.item()`` inside a
cond arm: torch 2.14.1's ``KeyError: 'unbacked_bindings'``), its straight-line regions are
compiled and the conds run between them; the candidate is checked and timed like the others
and is built only where the whole graph fails."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import stitch
from stitch.lower.regional import regional, regions

pytestmark = pytest.mark.slow  # Inductor compiles (about a minute here)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))
from repro_aoti_cond_item import FramesOffset  # noqa: E402 - the repro of the failure


class Straight(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2


def test_the_graph_is_cut_at_each_cond_and_runs_as_the_model():
    model, grid = FramesOffset(), torch.tensor([[2, 3], [1, 4]])
    module = torch.export.export(model, (grid,), strict=False).module()
    split, control = regions(module)
    assert len(control) == 2  # one cond per row of the grid, each a region of its own
    run, compiled = regional(module)
    assert compiled == 3
    for g in ([[2, 3], [1, 4]], [[1, 5], [3, 2]]):
        g = torch.tensor(g)
        assert torch.equal(run(g), model(g))


def test_auto_deploys_regions_where_inductor_fails_on_the_whole_graph():
    model, grid = FramesOffset(), torch.tensor([[2, 3], [1, 4]])
    program = stitch.export(model, (grid,), examples=[((torch.tensor([[1, 5], [3, 2]]),), {})])
    compiled = stitch.compile(program, "auto", candidates=["inductor", "regional"], repeats=3)
    by_name = {c.backend: c for c in compiled.decision.candidates}
    assert "regional" in by_name and by_name["regional"].correct, compiled.decision
    for g in ([[2, 3], [1, 4]], [[3, 1], [2, 2]]):
        g = torch.tensor(g)
        torch.testing.assert_close(compiled(g), model(g))


def test_a_graph_without_control_flow_is_not_cut():
    program = stitch.export(Straight(), (torch.randn(2, 3),))
    with pytest.raises(stitch.StitchError, match="holds none"):
        stitch.compile(program, "regional")
