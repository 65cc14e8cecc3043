"""A Python loop over a dynamic dimension (``for i in range(x.shape[0])``, a per-sample loop
holding a data-dependent branch) follows the size: torch.export would unroll it for the
traced size and guard on it; stitch makes it one ``torch.while_loop`` over a counter, so the
program takes every batch size the model does."""

from __future__ import annotations

import torch
from torch import nn

import stitch
from stitch.plan import Action


class PerSample(nn.Module):
    def forward(self, x):
        h = torch.zeros(x.shape[1])
        for i in range(x.shape[0]):
            if x[i].sum() > 0:
                h = h + x[i]
            else:
                h = h - x[i] * 0.5
        return h


class PerSampleRows(nn.Module):
    """Each sample's row written by index; the running total carried too."""

    def forward(self, x):
        out = torch.zeros_like(x)
        total = x.new_zeros(())
        for i in range(x.shape[0]):
            if x[i].mean() > 0:
                out[i] = x[i].relu()
            else:
                out[i] = x[i].abs() + total
            total = total + out[i].sum()
        return out, total


def _x(seed: int, n: int):
    return torch.randn(n, 4, generator=torch.Generator().manual_seed(seed))


def _check(model, program):
    for n, seed in ((1, 5), (2, 6), (7, 7), (11, 8)):
        x = _x(seed, n)
        for got, want in zip(torch.utils._pytree.tree_leaves(program(x)),
                             torch.utils._pytree.tree_leaves(model(x)), strict=True):
            torch.testing.assert_close(got, want)


def test_a_per_sample_loop_takes_every_batch_size():
    model = PerSample()
    program = stitch.export(model, (_x(0, 3),), examples=[((_x(1, 5),), {})])
    assert program.report.graph_ops.get("while_loop") == 1
    assert any(d.action == Action.WHILE_LOOP for d in program.report.decisions)
    _check(model, program)


def test_a_per_sample_loop_writing_rows_takes_every_batch_size():
    model = PerSampleRows()
    program = stitch.export(model, (_x(0, 3),), examples=[((_x(1, 5),), {})])
    assert program.report.graph_ops.get("while_loop") == 1
    _check(model, program)
