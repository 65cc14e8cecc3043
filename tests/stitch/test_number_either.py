"""``a or b`` / ``a and b`` as a value where an operand is a number read from data: Python's
result, selected in the graph (``rt_either.py``), not a guard on the read's truth."""

from __future__ import annotations

import torch

import stitch


class SafeScale(torch.nn.Module):
    """A normalisation written the usual way: divide by the peak, or by 1 where it is 0."""

    def forward(self, x):
        peak = x.abs().max().item() or 1.0
        return x / peak


def test_a_float_read_or_a_default_is_one_graph_on_both_sides():
    model = SafeScale()
    zeros, data = torch.zeros(3, 4), torch.randn(2, 3)  # sizes differ: dynamic
    program = stitch.export(model, (data,), examples=[((zeros,), {})])
    assert program.report.graphs_after == 1
    for x in (zeros, data, torch.randn(4, 5), -torch.zeros(3, 3)):
        torch.testing.assert_close(program(x), model(x), rtol=0, atol=0)


def count_per_group(index, dim_size=None):
    """A helper as torch_geometric's quantile aggregation writes it: a count whose length is
    the number of groups where given, a read the caller passes."""
    return torch.bincount(index, minlength=dim_size or 0)


class Counts(torch.nn.Module):
    def forward(self, index):
        groups = int(index.max()) + 1
        return count_per_group(index, groups).cumsum(0)


def test_an_int_read_or_zero_in_a_helper_sizes_its_output():
    model = Counts()
    first, second = torch.tensor([0, 1, 1, 3]), torch.tensor([2, 2, 0, 5, 5, 1])
    program = stitch.export(model, (first,), examples=[((second,), {})])
    for index in (first, second, torch.tensor([0, 0, 0]), torch.tensor([4, 1, 7, 7, 2])):
        assert torch.equal(program(index), model(index))


class Gate(torch.nn.Module):
    """``and`` of two reads: the second where the first is nonzero, else the first."""

    def forward(self, x):
        count = int((x > 0).sum())
        chosen = count and (x > 1).sum().item()
        return x * (chosen + 1)


def test_and_of_two_int_reads_gives_pythons_operand():
    model = Gate()
    examples = [torch.full((2, 3), -1.0), torch.randn(2, 3) * 3, torch.ones(2, 3) * 0.5]
    program = stitch.export(model, (examples[0],),
                            examples=[((x,), {}) for x in examples[1:]])
    for x in (*examples, torch.randn(2, 3) * 2):
        torch.testing.assert_close(program(x), model(x), rtol=0, atol=0)
