"""``max``/``min`` of two sizes from data inside a cond's arm, under stitch's tracing fixes:
torch.export's program computes the maximum (torch 2.14.1 alone gives the minimum,
``experiments/repro_max_in_hop.py``), and stitch's program is exact on inputs that tell the
two apart."""

from __future__ import annotations

import torch

import stitch
from capture.tracing_fixes import tracing_fixes


class ArmMax(torch.nn.Module):
    def forward(self, x, n):
        def taken(x, n):
            a, b = n.tolist()
            return x * max(a, b) - min(a, b)

        def other(x, n):
            return x.clone()

        return torch.cond(x.sum() > 0, taken, other, (x, n))


def test_max_of_sizes_in_a_cond_arm_is_the_maximum_under_the_fixes():
    x, n = torch.ones(3), torch.tensor([2, 5])
    with tracing_fixes():
        program = torch.export.export(ArmMax(), (x, n), strict=False)
    for pair in ([2, 5], [7, 1]):
        m = torch.tensor(pair)
        torch.testing.assert_close(program.module()(x, m), ArmMax()(x, m))


class MaxInBranch(torch.nn.Module):
    def forward(self, x, n):
        if x.sum() > 0:
            a, b = n.tolist()
            x = x * max(a, b)
        return x


def test_a_stitched_branch_taking_the_max_of_reads_is_exact():
    model, x = MaxInBranch(), torch.ones(3)
    program = stitch.export(model, (x, torch.tensor([2, 5])), examples=[((-x, torch.tensor([1, 1])), {})])
    for pair in ([2, 5], [7, 1], [3, 3]):
        for sign in (1, -1):
            m = torch.tensor(pair)
            torch.testing.assert_close(program(sign * x, m), model(sign * x, m))
