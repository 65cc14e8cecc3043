"""``while True:`` left by one ``if <test>: break``, wherever the ``break`` sits in the body:
a loop on the test (``canonicalize/while_true.py``), a ``torch.while_loop`` where the test is
data. It was a ``break`` in a branch, which torch.cond cannot express: refused."""

from __future__ import annotations

import pytest
import torch

import stitch


class BreaksLast(torch.nn.Module):  # a do-while
    def forward(self, x):
        i = 0
        while True:
            x = x * 0.5
            i += 1
            if x.norm() < 1.0 or i >= 6:
                break
        return x, i


class BreaksInTheMiddle(torch.nn.Module):
    def forward(self, x):
        n = 0
        while True:
            x = x - 1.0
            if x.max() < 0:
                break
            n = n + 1
            x = x * 0.9
        return x, n


class BreaksFirst(torch.nn.Module):
    def forward(self, x):
        k = 0
        while 1:
            if not (x.sum() > 0) or k >= 4:
                break
            x = x - 2.0
            k += 1
        return x, k


@pytest.mark.parametrize("model", [BreaksLast(), BreaksInTheMiddle(), BreaksFirst()])
def test_a_while_true_left_by_one_break_is_a_while_loop(model):
    t = torch.tensor
    inputs = [t([0.1, 0.2]), t([30.0, -4.0, 8.0]), t([3.0, 3.0]), t([-5.0, -1.0])]
    program = stitch.export(model, (inputs[1],), examples=[((inputs[0],), {})])
    assert any(d.action.name == "WHILE_LOOP" for d in program.report.decisions)
    for x in inputs:
        got, want = program(x), model(x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1] and type(got[1]) is int


class PrintsEachPass(torch.nn.Module):
    def forward(self, h):
        k = 0
        while True:
            if not (h.mean() > 0.5) or k >= 3:
                break
            print(f"mean {h.mean().item():.2f}")
            h = h - 1.0
            k += 1
        return h


def test_a_while_true_with_calls_is_bounded_by_its_negated_counter_test(capsys):
    """A body with a print cannot be a ``torch.while_loop``: the loop on the test is
    unrolled to the counter's bound, read from ``not (... or k >= 3)`` (De Morgan, the
    counter an int), each pass a cond whose print the epilogue replays."""
    model = PrintsEachPass()
    t = torch.tensor
    program = stitch.export(model, (t([5.0, 6.0]),), examples=[((t([0.0, 1.0]),), {})])
    for x in (t([5.0, 6.0]), t([0.0, 1.0]), t([2.0, 2.0]), t([9.0, 9.0])):
        capsys.readouterr()
        want = model(x)
        eager = capsys.readouterr().out
        torch.testing.assert_close(program(x), want)
        assert capsys.readouterr().out == eager
    assert eager.count("mean") == 3
