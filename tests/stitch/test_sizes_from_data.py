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
