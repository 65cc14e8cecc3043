"""A scalar read that reaches code through a call no name resolves (a submodule out of a
container, ``super().__call__``, keyword arguments) is followed where a run shows it
going (``reached_helpers.py``); and a rewritten method that calls the module function of
its own name calls that function (``functions.compile_function``)."""

from __future__ import annotations

import torch

import stitch


def grouped_sum(src, index, count):
    """torch_geometric's ``scatter`` as it builds its output: the count, a number, in a
    shape tuple."""
    size = src.size()[:0] + (count,) + src.size()[1:]
    return src.new_zeros(size).index_add_(0, index, src)


class Pool(torch.nn.Module):
    def forward(self, x, index, count=None):
        return grouped_sum(x, index, count)


class CallingBase(torch.nn.Module):
    """Reads the number of groups, then goes on through the base's ``__call__`` (which
    runs the subclass's ``forward``), as torch_geometric's aggregations do."""

    def __call__(self, x, index):
        count = int(index.max()) + 1 if index.numel() > 0 else 0
        return super().__call__(x, index=index, count=count)


class SumPool(CallingBase, Pool):
    pass


class Grouped(torch.nn.Module):
    """The read reaches the helper through a submodule taken out of a ModuleList."""

    def __init__(self) -> None:
        super().__init__()
        self.pools = torch.nn.ModuleList([Pool()])
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x, index):
        count = int(index.max()) + 1
        return self.pools[0](self.proj(x), index, count=count)


def _examples():
    g = torch.Generator().manual_seed(0)
    rows = []
    for groups in ((0, 0, 1, 2, 2), (0, 1, 1, 1, 2, 3, 3)):
        index = torch.tensor(groups)
        rows.append(((torch.randn(len(groups), 4, generator=g), index), {}))
    return rows


def test_read_followed_through_a_module_list_into_a_shape():
    torch.manual_seed(0)
    model = Grouped().eval()
    (first, _), *rest = _examples()
    program = stitch.export(model, first, examples=rest)
    assert program.report.graphs_after == 1
    reached = [d for d in program.report.decisions if "a scalar read reaches it" in d.reason]
    assert {d.function for d in reached} >= {"grouped_sum"}
    x, index = torch.randn(9, 4), torch.tensor([0, 1, 2, 3, 4, 5, 5, 6, 6])
    torch.testing.assert_close(program(x, index), model(x, index), rtol=0, atol=0)
    assert program(x, index).shape == (7, 4)


def test_read_followed_through_super_call_into_forward():
    model = SumPool().eval()
    (first, _), *rest = _examples()
    program = stitch.export(model, first, examples=rest)
    assert program.report.graphs_after == 1
    x, index = torch.randn(6, 4), torch.tensor([0, 0, 3, 3, 3, 4])
    torch.testing.assert_close(program(x, index), model(x, index), rtol=0, atol=0)


def scale(x):
    return x * 3


class SameName(torch.nn.Module):
    def scale(self, x):
        if x.sum() > 0:  # a break: this method is rewritten
            return scale(x)  # the module function, not this method
        return -x

    def forward(self, x):
        return self.scale(x)


def test_rewritten_method_calls_the_module_function_of_its_name():
    model = SameName()
    program = stitch.export(model, (torch.ones(3),), examples=[((-torch.ones(3),), {})])
    for x in (torch.ones(3), -torch.ones(3)):
        torch.testing.assert_close(program(x), model(x))
