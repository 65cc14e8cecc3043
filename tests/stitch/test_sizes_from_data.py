"""A size read from data (``int(index.max()) + 1``, the number of graphs in a torch-geometric
batch) that shapes a new tensor: one graph whose size is symbolic, exact on a batch of
another number of graphs."""

from __future__ import annotations

import torch

import stitch
from stitch.plan import Action


def broadcast(src, ref, dim: int):
    dim = ref.dim() + dim if dim < 0 else dim
    size = ((1, ) * dim) + (-1, ) + ((1, ) * (ref.dim() - dim - 1))
    return src.view(size).expand_as(ref)


def scatter_mean(src, index, dim: int = 0, dim_size=None):
    """torch-geometric's ``scatter`` (reduce='mean') as it is written there."""
    if dim_size is None:
        dim_size = int(index.max()) + 1 if index.numel() > 0 else 0
    size = src.size()[:dim] + (dim_size, ) + src.size()[dim + 1:]
    count = src.new_zeros(dim_size)
    count.scatter_add_(0, index, src.new_ones(src.size(dim)))
    count = count.clamp(min=1)
    index = broadcast(index, src, dim)
    out = src.new_zeros(size).scatter_add_(dim, index, src)
    return out / broadcast(count, out, dim)


class MeanPool(torch.nn.Module):
    def forward(self, x, batch):
        return scatter_mean(x, batch)


def test_a_size_read_from_data_shapes_the_output_in_one_graph():
    torch.manual_seed(0)
    model = MeanPool()
    program = stitch.export(model, (torch.randn(7, 4), torch.tensor([0, 0, 0, 1, 1, 2, 2])),
                            examples=[((torch.randn(5, 4), torch.tensor([0, 0, 1, 1, 1])), {})])
    x, batch = torch.randn(9, 4), torch.tensor([0, 1, 1, 2, 2, 3, 3, 3, 3])  # four graphs
    torch.testing.assert_close(program(x, batch), model(x, batch))
    assert program(x, batch).shape == (4, 4)
    assert any(d.action == Action.SYMBOLIC for d in program.report.decisions), \
        str(program.report)


def scatter_sum(src, index):
    dim_size = int(index.max()) + 1 if index.numel() > 0 else 0
    return src.new_zeros((dim_size,) + src.shape[1:]).index_add_(0, index, src)


class TopKPool(torch.nn.Module):
    """torch-geometric's TopKPooling: nodes per graph counted by ``scatter`` (a shape built
    as ``(dim_size,) + src.shape[1:]``), then the top half of each graph's nodes kept."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(16))

    def forward(self, x, batch):
        score = torch.tanh(x @ self.weight / self.weight.norm())
        num_nodes = scatter_sum(torch.ones_like(batch), batch)
        k = (0.5 * num_nodes.float()).ceil().long()
        _, perm = torch.sort(score, descending=True)
        b, bperm = torch.sort(batch[perm], stable=True)
        ptr = torch.cat([num_nodes.new_zeros(1), num_nodes.cumsum(0)])
        keep = perm[bperm[(torch.arange(x.size(0)) - ptr[b]) < k[b]]]
        return x[keep] * score[keep].view(-1, 1), batch[keep]


def _graphs(sizes, seed):
    g = torch.Generator().manual_seed(seed)
    batch = torch.cat([torch.full((n,), i) for i, n in enumerate(sizes)])
    return torch.randn(len(batch), 16, generator=g), batch


def test_a_shape_concatenated_from_a_count_read_in_a_branch_is_one_graph():
    """``(dim_size,) + src.shape[1:]`` with ``dim_size`` read under ``if index.numel() >
    0``: the census took the shape as a tuple (Dynamo fails making a torch.Size of a read),
    torch.export keeps the count symbolic."""
    torch.manual_seed(0)
    model = TopKPool().eval()
    program = stitch.export(model, _graphs((10,), 0), examples=[(_graphs((6, 9, 5), 1), {})])
    with torch.no_grad():
        for sizes, seed in (((12, 7), 2), ((3, 3, 3, 4), 3), ((10,), 0)):
            args = _graphs(sizes, seed)
            for got, want in zip(program(*args), model(*args), strict=True):
                torch.testing.assert_close(got, want)
