"""A loop over a tensor's rows that unpacks each row (``for x0, y0, x1, y1 in boxes:``)
becomes a ``torch.while_loop`` like one that names the row: the unpacking moves into the
body (tensor_loop._row_named), not refused as "the loop variable is not a plain name"."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import stitch
from stitch.errors import UnfixableBreaksError


class KeptAreas(nn.Module):
    def forward(self, boxes, scores):
        total = torch.zeros(())
        for x0, y0, x1, y1 in boxes[scores > 0.5]:  # as many rows as the data keeps
            total = total + (x1 - x0) * (y1 - y0)
        return total


class NestedPairs(nn.Module):
    def forward(self, pairs, keep):
        acc = torch.zeros(2)
        for (a, b), c in pairs[keep > 0]:  # each row a 2 x 2 block: ((a, b), c)
            acc = acc * 0.5 + a * b + c
        return acc


class ListTargetWithRest(nn.Module):
    """The same loop written with a list target and a starred rest."""

    def forward(self, boxes, scores):
        total = torch.zeros(())
        for [x0, y0], *rest in boxes[scores > 0.5].reshape(-1, 2, 2):
            total = total + (rest[0][0] - x0) * (rest[0][1] - y0)
        return total


class ReadsAnIndex(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = nn.Parameter(torch.randn(8, 3))

    def forward(self, pairs, keep):
        total = torch.zeros(3)
        for i, w in pairs[keep > 0]:
            total = total + self.table[int(i)] * w  # a Python number from the row
        return total


def _boxes(n: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    lo = torch.rand(n, 2, generator=g)
    return torch.cat([lo, lo + torch.rand(n, 2, generator=g)], 1), torch.rand(n, generator=g)


def _one_graph(program) -> None:
    assert program.report.graphs_after == 1, program.report


def test_a_loop_unpacking_each_row_is_one_graph_and_exact():
    model = KeptAreas()
    with pytest.raises(Exception, match="data-dependent"):  # the premise: export refuses
        torch.export.export(model, _boxes(6, 0))
    program = stitch.export(model, _boxes(6, 0), examples=[(_boxes(6, 1), {})])
    _one_graph(program)
    for seed in range(2, 8):
        args = _boxes(6, seed)
        torch.testing.assert_close(program(*args), model(*args), rtol=0, atol=0)
    none_kept = (_boxes(6, 9)[0], torch.zeros(6))  # no row: the loop runs no iteration
    torch.testing.assert_close(program(*none_kept), model(*none_kept))


def test_nested_unpacking_is_one_graph_and_exact():
    model = NestedPairs()
    g = torch.Generator().manual_seed(0)
    inputs = [(torch.randn(5, 2, 2, generator=g), torch.randn(5, generator=g))
              for _ in range(5)]
    program = stitch.export(model, inputs[0], examples=[(inputs[1], {})])
    _one_graph(program)
    for args in inputs[2:]:
        torch.testing.assert_close(program(*args), model(*args), rtol=0, atol=0)


def _pairs(seed: int):
    g = torch.Generator().manual_seed(seed)
    rows = torch.randint(0, 8, (5, 1), generator=g).float()
    return torch.cat([rows, torch.rand(5, 1, generator=g)], 1), torch.randn(5, generator=g)


def test_an_unpacked_name_read_as_a_number_is_one_graph_and_exact():
    """``self.table[int(i)]``: the row comes from index_select, and the number read from it
    stays in the while_loop body, which holds a number read from what index_select gives."""
    torch.manual_seed(0)
    model = ReadsAnIndex()
    program = stitch.export(model, _pairs(0), examples=[(_pairs(1), {})])
    _one_graph(program)
    for seed in range(2, 6):
        torch.testing.assert_close(program(*_pairs(seed)), model(*_pairs(seed)), rtol=0, atol=0)


class IndexesWithTheRow(nn.Module):
    def forward(self, x, labels):
        out = torch.zeros(x.shape[1])
        for c in torch.unique(labels):
            out = out + x[c]  # the row itself as the index
        return out


def test_the_row_itself_as_an_index_is_refused_by_name():
    x, labels = torch.randn(6, 3), torch.tensor([0, 2, 2, 5, 1, 0])
    with pytest.raises(UnfixableBreaksError, match="indexes with the loop variable 'c' itself"):
        stitch.export(IndexesWithTheRow(), (x, labels))


def test_a_list_target_with_a_starred_rest_is_one_graph_and_exact():
    model = ListTargetWithRest()
    program = stitch.export(model, _boxes(6, 0), examples=[(_boxes(6, 1), {})])
    _one_graph(program)
    for seed in range(2, 6):
        args = _boxes(6, seed)
        torch.testing.assert_close(program(*args), model(*args), rtol=0, atol=0)
