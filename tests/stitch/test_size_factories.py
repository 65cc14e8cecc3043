"""Tensors made from dynamic sizes by torch's factories: ``torch.linspace`` with a size as its
number of steps (kornia's ``warp_affine`` grid: ``torch.linspace(-1.0, 1.0, w_out)``), and
``t.new_tensor`` of numbers computed from sizes (kornia's LAF normalisation:
``nlaf.new_tensor([wf, hf])``). torch.export alone makes the sizes constants; while stitch
traces, torch's Python implementations keep them symbolic
(``synthesize/operators/shims.py``), so one program serves every size."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.export import Dim

import stitch
from stitch.synthesize.operators.shims import (
    _linspace,
    _new_tensor,
    _original_linspace,
    shimmed,
)


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


class Extents(nn.Module):
    """kornia's LAF normalisation: frames divided by the image's extents, from its sizes."""

    def forward(self, laf, img):
        h, w = img.shape[-2:]
        wf, hf = float(max(w - 1, 1)), float(max(h - 1, 1))
        return laf / laf.new_tensor([wf, hf])


def test_new_tensor_of_numbers_from_sizes_is_one_program_for_every_size():
    model = Extents()
    laf = torch.rand(1, 5, 2) * 50
    program = stitch.export(model, (laf, torch.randn(1, 1, 32, 48)),
                            examples=[((laf, torch.randn(1, 1, 40, 24)), {})])
    for size in [(1, 1, 16, 16), (1, 1, 70, 33)]:
        img = torch.randn(*size)
        torch.testing.assert_close(program(laf, img), model(laf, img))


def test_new_tensor_shim_keeps_eager_and_leaves_the_class_as_it_was():
    t = torch.randn(2, dtype=torch.float64)
    with shimmed():
        assert torch.Tensor.new_tensor is _new_tensor
        made = t.new_tensor([1, 2])
        assert made.dtype == torch.float64 and torch.equal(made, torch.tensor([1.0, 2.0],
                                                                               dtype=torch.float64))
    assert "new_tensor" not in vars(torch.Tensor)  # inherited from TensorBase, as before
