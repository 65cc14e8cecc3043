"""A symbolic bool's truth is itself (rt_symbolic.number_truth): torch writes ``SymBool !=
0`` as the constant True, so a loop whose condition joins a size test and a counter
(``while any(s % 4 for s in h.shape) and k < 3``) lost ``k < 3``, and the constant stood in
for torch's own assertions in the arm's graph: the program raised on an input the model
takes."""

from __future__ import annotations

import torch
from torch import nn
from torch.fx.experimental.symbolic_shapes import ShapeEnv

import stitch
from stitch.synthesize.operators.rt_symbolic import number_truth


def test_torch_takes_a_symbolic_bool_unequal_to_zero_as_always_true():
    """Why ``number_truth`` tests for a bool first; if this fails, torch fixed it."""
    k = ShapeEnv().create_unbacked_symint()
    assert str((k < 3).node.expr) == "u0 < 3"
    assert str(((k < 3) != 0).node.expr) == "True"


def test_a_truth_is_kept_symbolic_and_a_number_compared_with_zero():
    k = ShapeEnv().create_unbacked_symint()
    below = k < 3
    assert number_truth(below) is below
    assert number_truth(True) is True and number_truth(0) is False
    assert str(number_truth(k).node.expr) == "Ne(u0, 0)"


STATS: dict = {}  # a module global the loop sets an item of


class SizeAndCounter(nn.Module):
    """A loop while a size is not a multiple of 4, at most three times (a Python counter);
    each pass records a mean in a module global."""

    def forward(self, x):
        h = x * 1.5
        extra = None
        k = 0
        while any(s % 4 != 0 for s in h.shape) and k < 3:
            STATS["mean"] = h.mean()
            extra = h.mean(0)
            h = h - 1.0
            k += 1
        return h if extra is None else h + extra


def test_a_loop_on_a_size_test_and_a_counter_runs_as_many_times_as_eager():
    model = SizeAndCounter()
    inputs = [torch.randn(4, 8), torch.randn(6, 8), torch.randn(4, 12)]
    program = stitch.export(model, (inputs[0],), examples=[((x,), {}) for x in inputs[1:]])
    for x in [*inputs, torch.randn(6, 12), torch.randn(8, 8), torch.randn(5, 7)]:
        STATS.clear()
        want = model(x), dict(STATS)
        STATS.clear()
        got = program(x), dict(STATS)
        torch.testing.assert_close(got, want, rtol=0, atol=0)
