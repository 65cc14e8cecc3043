"""``torch.cdist`` (p = 2) chooses its kernel by the row count: by matrix products above 25
rows. On a row count known only at run time (torch_geometric's ``MemPooling``, after
``to_dense_batch``) torch.export cannot make that test; on a dynamic one it fixes the traced
side. stitch's stand-in runs both kernels under ``torch.cond`` on the test
(``shims._cdist``), and a torch op's own test of a size from data is left to torch.export
rather than refused (capture/sites.py)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import stitch
from stitch.synthesize.operators.shims import _cdist, shimmed


class Centroids(nn.Module):
    """Distances from fixed centroids to rows whose count the input holds."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.k = nn.Parameter(torch.randn(6, 4))

    def forward(self, x, counts):
        rows = int(counts.max())
        y = torch.ones(rows, 4) * x[0]
        return torch.cdist(self.k, y) ** 2


class Nearest(nn.Module):
    """Distances to a point cloud of any size."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.k = nn.Parameter(torch.randn(6, 3))

    def forward(self, points):
        return torch.cdist(self.k, points).min(dim=0).values


def _conds(program) -> int:
    return sum(n.target is torch.ops.higher_order.cond
               for n in program.exported_program.graph.nodes)


def test_torch_export_alone_cannot_choose_the_kernel():
    class Unbacked(nn.Module):
        def forward(self, x, counts):
            rows = counts.max().item()
            torch._check(rows >= 2)
            return torch.cdist(x, torch.ones(rows, 4) * x[0])

    with pytest.raises(Exception, match="u0 > 25"):
        torch.export.export(Unbacked(), (torch.randn(3, 4), torch.tensor([1, 5])))


def test_rows_from_data_are_one_program_on_both_kernels():
    model = Centroids()
    x = torch.randn(3, 4)
    program = stitch.export(model, (x, torch.tensor([1, 5])),
                            examples=[((x, torch.tensor([30, 2])), {})])
    assert program.report.graphs_after == 1, str(program.report)
    assert _conds(program) == 1
    for n in (1, 25, 26, 100):
        counts = torch.tensor([n, 1])
        assert torch.equal(program(x, counts), model(x, counts))


def test_a_dynamic_row_count_is_one_program_on_both_sides_of_25():
    model = Nearest()
    program = stitch.export(model, (torch.randn(20, 3),), examples=[((torch.randn(30, 3),), {})])
    assert _conds(program) == 1
    for n in (1, 2, 25, 26, 100):
        points = torch.randn(n, 3)
        assert torch.equal(program(points), model(points))


@pytest.mark.parametrize("compute_mode", ["use_mm_for_euclid_dist_if_necessary",
                                          "donot_use_mm_for_euclid_dist"])
def test_the_stand_in_equals_the_original_on_every_side(compute_mode):
    a, b = torch.randn(2, 30, 5), torch.randn(2, 7, 5)

    class Pair(nn.Module):
        def forward(self, a, b):
            return torch.cdist(a, b, compute_mode=compute_mode)

    rows = torch.export.Dim("rows", min=2)
    with shimmed():
        assert torch.cdist is _cdist
        ep = torch.export.export(Pair(), (a, b), dynamic_shapes=({1: rows}, None))
    assert torch.cdist is not _cdist
    for n in (3, 25, 26, 60):
        a = torch.randn(2, n, 5)
        assert torch.equal(ep.module()(a, b), torch.cdist(a, b, compute_mode=compute_mode))
