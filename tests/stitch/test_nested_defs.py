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
