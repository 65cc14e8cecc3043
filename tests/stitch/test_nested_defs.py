"""A helper defined inside forward on every call (``def step(h): ...``) is rewritten with the
function that defines it: its data-dependent ``if`` is one cond, its print replayed."""

from __future__ import annotations

import contextlib
import io

import torch

import stitch


class DefinesAStep(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = x * 1.5
        owner = self

        def step(h):
            if h.sum() > 0:
                print(f"positive {h.sum().item():.3f}")
                h = owner.lin(h)
            else:
                h = -h
            return h

        return step(h)


def _run(fn, x):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        y = fn(x)
    return y, out.getvalue()


def test_a_function_defined_in_forward_is_rewritten_with_it():
    torch.manual_seed(0)
    model = DefinesAStep()
    program = stitch.export(model, (torch.ones(2, 4),), examples=[((-torch.ones(2, 4),), {})])
    assert program.report.graph_ops.get("cond") == 1, str(program.report)
    for x in (torch.randn(2, 4), torch.ones(2, 4) * 3, -torch.ones(2, 4), torch.randn(2, 4)):
        (got, printed), (want, expected) = _run(program, x), _run(model, x)
        torch.testing.assert_close(got, want)
        assert printed == expected


class CountsInAClosure(torch.nn.Module):
    def forward(self, x):
        halvings = 0

        def step(h):
            nonlocal halvings
            if h.abs().max() > 1:
                halvings += 1
                return h / 2
            return h

        for _ in range(3):
            x = step(x)
        return x, halvings


def test_a_nonlocal_counter_set_in_a_branch_that_returns():
    """A closure's ``nonlocal`` counter set in an arm that returns early: the arms take it
    and give it back beside the returned value, and the store after the cond reaches the
    caller's cell. It was no operand of the arm (UnboundLocalError while torch.cond traced
    it), then, carried in but not out, a constant: refused by verification."""
    model = CountsInAClosure()
    program = stitch.export(model, (torch.full((3,), 0.5),), examples=[((torch.full((4,), 5.0),), {})])
    for x in (torch.full((2,), 0.5), torch.full((5,), 3.0), torch.full((5,), 100.0)):
        got, want = program(x), model(x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1] and type(got[1]) is int
