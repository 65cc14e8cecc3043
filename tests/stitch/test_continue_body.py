"""``if <data>: <work>; continue`` in a loop: the work stays the if's body and the rest of
the loop body its else, one cond per iteration, exact on every path."""

from __future__ import annotations

import torch

import stitch


class SkipsTheRest(torch.nn.Module):
    def forward(self, x):
        h = x * 1.5
        for _ in range(3):
            h = h * 0.9
            if h.mean().item() > 0.5:
                h = h * 2.0
                continue
            h = h - 1.0
        return h


def test_work_before_a_continue_stays_with_it():
    model = SkipsTheRest()
    program = stitch.export(model, (torch.ones(2, 4),), examples=[((-torch.ones(2, 4),), {})])
    ops = program.report.graph_ops  # cheap pure arms: a select, else a cond
    assert ops.get("cond", 0) + ops.get("where", 0) >= 3, str(program.report)
    for v in (-2.0, -0.5, 0.0, 0.3, 0.45, 0.6, 1.0, 3.0):
        x = torch.full((2, 4), v) + torch.linspace(-0.1, 0.1, 8).reshape(2, 4)
        torch.testing.assert_close(program(x), model(x))
