"""An ``if`` on an int read from data (``grid.tolist()``) whose arms build sizes from it,
alone and in a loop over the grid's rows (transformers' ``get_vision_pixel_shuffle_index``:
``if frames > 1:``): one torch.cond, exact on both sides.

Three things made these refusals before: ``int()`` of a number already read as a symbolic
int guarded on it (``rt_values.scalar``); the ``if`` inside a loop body a rewrite made was
not converted (``branch_to_cond``); and the int, lifted into the arms as itself
(``rt_lift.py``), met an arm's op that constrains it (``torch.arange(frames)``), which
Dynamo's guard check cannot decide for a size known only at run time: the cond is traced
again with the int carried as a 0-d tensor (``rt_control._carried``)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import stitch
from stitch.plan import Action


class FramesOffset(nn.Module):
    def forward(self, x, grid):
        f, h = grid.tolist()
        f, h = int(f), int(h)
        p = torch.arange(h)
        if f > 1:
            off = (torch.arange(f) * h).view(f, 1)
            p = (p.unsqueeze(0) + off).reshape(-1)
        return x[p] * 2


def shuffle_index(grid, m):
    indices = []
    offset = 0
    for frames, height, width in grid.tolist():
        frames, height, width = int(frames), int(height), int(width)
        permutation = torch.arange(height * width)
        permutation = permutation.view(height // m, m, width // m, m)
        permutation = permutation.permute(0, 2, 1, 3).reshape(-1)
        if frames > 1:
            frame_offsets = (torch.arange(frames) * height * width).view(frames, 1)
            permutation = (permutation.unsqueeze(0) + frame_offsets).reshape(-1)
        indices.append(permutation + offset)
        offset += frames * height * width
    return torch.cat(indices, dim=0)


class ShuffleEachImage(nn.Module):
    """The pixel-shuffle index of transformers' Muse towers, then a split per image (so the
    census captures scalar reads, as in those towers)."""

    def forward(self, x, grid):
        x = x[shuffle_index(grid, 2)] * 2
        lengths = grid[:, 0] * grid[:, 1] * grid[:, 2]
        return torch.cat([p.softmax(0) for p in torch.split(x, lengths.tolist(), 0)], 0)


CASES = [
    (FramesOffset, lambda g: (torch.randn(40, 2), torch.tensor(g)), [1, 4], [1, 5],
     ([2, 3], [3, 5], [1, 7], [0, 3])),
    (ShuffleEachImage, lambda g: (torch.randn(32, 3), torch.tensor(g)),
     [[1, 4, 4], [1, 2, 8]], [[1, 4, 4], [1, 2, 8]],
     ([[2, 2, 4], [1, 4, 4]], [[1, 2, 2], [1, 2, 14]], [[3, 2, 2], [1, 4, 4]])),
]


@pytest.mark.parametrize("model_type, make, grid, other, grids", CASES,
                         ids=[c[0].__name__ for c in CASES])
def test_an_if_on_an_int_read_from_data_is_a_cond_exact_on_both_sides(model_type, make, grid,
                                                                       other, grids):
    torch.manual_seed(0)
    model = model_type()
    program = stitch.export(model, make(grid), examples=[(make(other), {})])
    assert program.report.graphs_after == 1, str(program.report)
    assert any(d.action == Action.COND for d in program.report.decisions), str(program.report)
    for g in grids:  # both sides of the test; grids and sizes no example had
        args = make(g)
        torch.testing.assert_close(program(*args), model(*args), rtol=0, atol=0)
