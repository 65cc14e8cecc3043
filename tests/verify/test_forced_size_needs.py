"""A forced side whose test joins sizes with data (``while x.shape[0] > 3 and k < 3:``, the
counter carried as a tensor) is not run on a cut example whose sizes contradict it
(verify/forced.size_needs): no input of those sizes takes that side, so the run is no
evidence, and it had refused a program that is exact on every input."""

from __future__ import annotations

import torch
from torch import nn

import stitch
from capture.branch_truths import needed_of_node

STATS: dict = {}  # a module global the loop sets an item of


class RowsLoop(nn.Module):
    """A loop on a size and a counter, inside a branch on data."""

    def forward(self, x):
        h = x * 1.5
        n = 0
        if h[:, -1].max() > -5.0:
            k = 0
            while h.shape[0] > 3 and k < 3:
                STATS["mean"] = h.mean()
                n = n + 1
                h = h - 1.0
                k += 1
        else:
            h = -h
        return h + n, n


def _run(fn, x):
    STATS.clear()
    out = fn(x)
    return out, dict(STATS)


def test_the_loop_is_exported_and_runs_as_eager_on_every_size_and_side():
    model = RowsLoop()
    inputs = [torch.randn(4, 8), torch.randn(2, 8), torch.randn(5, 8)]
    program = stitch.export(model, (inputs[0],), examples=[((x,), {}) for x in inputs[1:]])
    for rows in range(2, 7):
        for x in (torch.randn(rows, 8), torch.full((rows, 8), -9.0)):  # both sides of the if
            torch.testing.assert_close(_run(program, x), _run(model, x), rtol=0, atol=0)


def test_what_a_side_needs_of_sizes_is_read_through_and_not():
    graph = torch.fx.Graph()
    size, data = graph.placeholder("size"), graph.placeholder("data")
    rows = torch.fx.experimental.symbolic_shapes.ShapeEnv().create_unbacked_symint()
    size.meta["val"] = rows > 3
    data.meta["val"] = torch.ones((), dtype=torch.bool)
    both = graph.call_function(torch.ops.aten.logical_and.default, (size, data))
    neither = graph.call_function(torch.ops.aten.logical_not.default, (both,))
    assert str(needed_of_node(both, True)) == "u0 > 3"
    assert needed_of_node(both, False) is None  # false by the size or by the data
    assert str(needed_of_node(neither, False)) == "u0 > 3"


class AnyOfSizes(torch.nn.Module):
    """``any(s % 4 != 0 for s in x.shape)`` as stitch computes it in a test on sizes: each
    size's truth a 0-d tensor, stacked, reduced."""

    def forward(self, x):
        truths = [torch.full((), s % 4 != 0, dtype=torch.bool).to(torch.bool) for s in x.shape]
        return torch.stack([t.reshape(()).bool() for t in truths]).any()


def test_the_truth_of_any_over_sizes_is_the_or_of_theirs():
    from capture.branch_truths import truth_of_node

    ep = torch.export.export(AnyOfSizes(), (torch.randn(6, 8),), dynamic_shapes=(
        {0: torch.export.Dim.AUTO, 1: torch.export.Dim.AUTO},), strict=False)
    (reduced,) = [n for n in ep.graph.nodes if n.target is torch.ops.aten.any.default]
    truth = truth_of_node(reduced)
    assert truth is not None and len(truth.args) == 2 and "Mod" in str(truth)
    assert needed_of_node(reduced, False) is not None  # false: every size a multiple of 4
