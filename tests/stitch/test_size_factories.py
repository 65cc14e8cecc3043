"""Tensors made from dynamic sizes by torch's factories: ``torch.linspace`` with a size as its
number of steps (kornia's ``warp_affine`` grid: ``torch.linspace(-1.0, 1.0, w_out)``), and
``t.new_tensor`` of numbers computed from sizes (kornia's LAF normalisation:
``nlaf.new_tensor([wf, hf])``), and ``take_along_dim`` over a dynamic size (torch_geometric's
median aggregation). torch.export alone makes the sizes constants; while stitch traces,
torch's Python implementations keep them symbolic (``synthesize/operators/shims.py``), so one
program serves every size."""

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
    _take_along_dim,
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


class SortedGroups(nn.Module):
    """Nodes sorted per feature, their group index taken along the sort (torch_geometric's
    ``MedianAggregation``: ``index.take_along_dim(x_perm, dim=0)``)."""

    def forward(self, x, index):
        perm = x.argsort(dim=0)
        groups = index.view(-1, 1).expand_as(x).take_along_dim(perm, dim=0)
        return torch.take_along_dim(x, perm, dim=0) * (1 + groups)


def _nodes(n: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 3, generator=g), torch.randint(0, 4, (n,), generator=g)


def test_torch_export_alone_fixes_the_size_take_along_dim_takes_along():
    """What the shim is for (torch 2.14.1): without it the number of nodes is a constant."""
    ep = torch.export.export(SortedGroups(), _nodes(10, 0), strict=False,
                             dynamic_shapes=({0: Dim.AUTO}, {0: Dim.AUTO}))
    with pytest.raises(AssertionError, match="Guard failed"):
        ep.module()(*_nodes(7, 1))


def test_take_along_dim_over_a_dynamic_size_is_one_program_for_every_size():
    model = SortedGroups()
    program = stitch.export(model, _nodes(10, 0), examples=[(_nodes(13, 1), {})])
    for n, seed in [(3, 2), (25, 3), (10, 4)]:
        torch.testing.assert_close(program(*_nodes(n, seed)), model(*_nodes(n, seed)),
                                   rtol=0, atol=0)


@pytest.mark.parametrize("a_shape, i_shape, dim", [
    ((10, 4), (3, 4), 0), ((10, 4), (10, 1), 1), ((5, 1, 3), (5, 4, 2), 2),
    ((5, 6, 3), (1, 6, 3), -3), ((4, 3), (2, 3), None)])
def test_take_along_dim_shim_equals_the_original_under_a_trace(a_shape, i_shape, dim):
    """Broadcasting but along ``dim``, a negative ``dim`` and ``dim=None`` (the flattened
    input), each traced with every size dynamic: the program equals torch's own op."""
    a = torch.randn(*a_shape)
    i = torch.randint(0, a.numel() if dim is None else a.shape[dim], i_shape)

    class Take(nn.Module):
        def forward(self, a, i):
            return a.take_along_dim(i, dim) if dim is not None else torch.take_along_dim(a, i)

    with shimmed():
        assert torch.take_along_dim is _take_along_dim
        ep = torch.export.export(Take(), (a, i), strict=False, dynamic_shapes=(
            {k: Dim.AUTO for k in range(a.dim())}, {k: Dim.AUTO for k in range(i.dim())}))
    assert "take_along_dim" not in vars(torch.Tensor)  # inherited from TensorBase, as before
    assert torch.equal(ep.module()(a, i), torch.take_along_dim(a, i, dim))
