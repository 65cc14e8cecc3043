"""``torch.linspace`` with a dynamic size as its number of steps (kornia's ``warp_affine``
grid: ``torch.linspace(-1.0, 1.0, w_out)``): torch.export alone makes the count a constant;
while stitch traces, torch's Python implementation keeps it symbolic
(``synthesize/operators/shims.py``), so one program serves every width."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.export import Dim

import stitch
from stitch.synthesize.operators.shims import _linspace, _original_linspace, shimmed


class Grid(nn.Module):
    """A sampling grid over the input's width and height, as kornia builds one."""

    def forward(self, x):
        h, w = x.shape[-2:]
        xs = torch.linspace(-1.0, 1.0, w, dtype=x.dtype)
        ys = torch.linspace(-1.0, 1.0, h, dtype=x.dtype)
        return x * xs + ys[:, None]


def test_torch_export_alone_fixes_the_steps():
    """What the shim is for (torch 2.14.1): without it the width is a constant."""
    ep = torch.export.export(Grid(), (torch.randn(1, 2, 6, 8),), strict=False,
                             dynamic_shapes=({2: Dim.AUTO, 3: Dim.AUTO},))
    with pytest.raises(AssertionError, match="Guard failed"):
        ep.module()(torch.randn(1, 2, 6, 12))


def test_a_grid_over_the_input_size_is_one_program_for_every_size():
    model = Grid()
    program = stitch.export(model, (torch.randn(1, 2, 6, 8),),
                            examples=[((torch.randn(1, 2, 9, 12),), {})])
    for size in [(1, 2, 5, 7), (1, 2, 16, 30), (1, 2, 2, 2)]:
        x = torch.randn(*size)
        torch.testing.assert_close(program(x), model(x))


def test_numbers_take_the_original():
    with shimmed():
        assert torch.linspace is _linspace
        for start, end, steps in [(-1.0, 1.0, 5), (0, 10, 11), (1.0, -1.0, 2), (0.0, 1.0, 0)]:
            assert torch.equal(torch.linspace(start, end, steps),
                               _original_linspace(start, end, steps))
    assert torch.linspace is _original_linspace
