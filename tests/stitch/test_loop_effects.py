"""A loop over ``range(n)``, ``n`` a size known only at run time with a static bound, whose
body prints, logs or appends: unrolled to the bound, each iteration a cond whose calls the
epilogue replays when that iteration ran, in order, with the numbers it read (a read kept
symbolic inside the arm included). Without a static bound the loop is refused, saying how to
bound it."""

from __future__ import annotations

import logging

import pytest
import torch

import stitch
from stitch.errors import StitchError

LOG = logging.getLogger("tests.loop_effects")


class PerDetection(torch.nn.Module):
    """A per-detection loop over at most three kept rows, printing, logging and recording
    each row's score."""

    def __init__(self):
        super().__init__()
        self.scores = []

    def forward(self, x):
        rows = x[x[:, 0] > 0][:3]
        h = x.sum(0)
        for i in range(rows.shape[0]):
            score = rows[i].sum().item()
            print(f"row {i}: {score:.3f}")
            LOG.info("row %d kept", i)
            self.scores.append(rows[i].sum())
            h = h + rows[i]
        return h


class Unbounded(torch.nn.Module):
    def forward(self, x):
        rows = x[x[:, 0] > 0]
        h = x.sum(0)
        for i in range(rows.shape[0]):
            print("row", i)
            h = h + rows[i]
        return h


def _with_first(kept: list[int], n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    x[:, 0] = -1.0
    x[kept, 0] = 1.0
    return x


def test_each_iteration_replays_its_calls(capsys, caplog):
    examples = [_with_first([0, 2, 3, 4], 6, 0), _with_first([1], 5, 1)]
    program = stitch.export(PerDetection(), (examples[0],),
                            examples=[((examples[1],), {})])
    assert program.report.graphs_after == 1
    for kept, n, seed in [([0, 1, 2, 3, 4], 7, 2), ([], 3, 3), ([1, 3], 4, 4)]:
        x = _with_first(kept, n, seed)
        eager_model, model = PerDetection(), program
        capsys.readouterr()
        caplog.clear()
        with caplog.at_level(logging.INFO, logger=LOG.name):
            expected = eager_model(x)
            eager_text = capsys.readouterr().out
            eager_logs = [r.getMessage() for r in caplog.records]
            caplog.clear()
            actual = model(x)
            text = capsys.readouterr().out
            logs = [r.getMessage() for r in caplog.records]
        torch.testing.assert_close(actual, expected)
        assert text == eager_text and text.count("row") == min(len(kept), 3)
        assert logs == eager_logs


def test_appends_follow_the_iterations_that_ran():
    examples = [_with_first([0, 2, 3, 4], 6, 0), _with_first([1], 5, 1)]
    model = PerDetection()
    program = stitch.export(model, (examples[0],), examples=[((examples[1],), {})])
    x = _with_first([2, 4], 5, 5)
    eager = PerDetection()
    eager(x)
    model.scores.clear()
    program(x)
    assert len(model.scores) == len(eager.scores) == 2
    for a, b in zip(model.scores, eager.scores, strict=True):
        torch.testing.assert_close(a, b)


def test_a_loop_with_no_static_bound_is_refused_saying_how_to_bound_it():
    examples = [_with_first([0, 2], 6, 0), _with_first([1], 5, 1)]
    with pytest.raises(StitchError) as caught:
        stitch.export(Unbounded(), (examples[0],), examples=[((examples[1],), {})])
    assert "torch._check(n <= K)" in str(caught.value)
    assert "test_loop_effects.py:" in str(caught.value)


class TwoPasses(torch.nn.Module):
    """One or two refinement passes, by a test on data, each printing its mean."""

    def forward(self, x):
        h = x * 1.5
        s = 1.0
        for i in range(1 + int(h.mean().item() > 0.5)):
            print(f"pass {i} mean={h.mean().item():.3f}")
            s = s * 0.5
            h = h - 0.5
        return h * s


def test_a_count_bounded_by_its_source_is_unrolled(capsys):
    low, high = torch.full((2, 3), 0.1), torch.full((4, 3), 2.0)
    program = stitch.export(TwoPasses(), (low,), examples=[((high,), {})])
    assert program.report.graphs_after == 1
    for x in (torch.full((3, 3), 0.2), torch.full((1, 3), 3.0)):
        capsys.readouterr()
        expected = TwoPasses()(x)
        eager_text = capsys.readouterr().out
        actual = program(x)
        assert capsys.readouterr().out == eager_text
        torch.testing.assert_close(actual, expected)
