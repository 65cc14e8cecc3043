"""Tensors used as slice bounds (``x[start:end]`` with 0-d tensors) become symbolic ints:
loads and stores slice as written, in one graph (synthesize/canonicalize/slice_bounds.py)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import stitch
from stitch.plan import Action
from stitch.synthesize.operators.rt_slices import store_slice


def expert_gemm(tokens, weights, tokens_per_expert):
    """Aria 4.52's sequential expert GEMM: each expert's rows sliced out of a cumulative
    count (tensors as bounds), multiplied, stored back at the same bounds."""
    output = torch.zeros(tokens.shape[0], weights.shape[-1], dtype=tokens.dtype)
    cumsum = torch.cat((torch.zeros(1, dtype=torch.long), torch.cumsum(tokens_per_expert, 0)))
    for expert in range(weights.shape[0]):
        start = cumsum[expert]
        end = cumsum[expert + 1]
        rows = tokens[start:end]
        output[start:end] = torch.matmul(rows, weights[expert])
    return output


class Experts(nn.Module):
    def __init__(self):
        super().__init__()
        self.weights = nn.Parameter(torch.randn(4, 8, 6, generator=torch.Generator().manual_seed(0)))

    def forward(self, tokens, counts):
        return expert_gemm(tokens, self.weights, counts)


class NegativeStart(nn.Module):
    """A bound from data that may be negative: Python counts it from the end."""

    def forward(self, x):
        start = (x > 0).sum() - 3
        out = torch.zeros_like(x)
        out[start:] = x[start:] * 2
        return out


def test_expert_rows_sliced_by_tensor_bounds_export_as_one_graph():
    tokens = torch.randn(10, 8)
    model = Experts()
    program = stitch.export(model, (tokens, torch.tensor([3, 2, 4, 1])),
                            examples=[((tokens, torch.tensor([0, 5, 5, 0])), {})])
    assert program.report.graphs_after == 1 and program.report.breaks_after == 0
    assert Action.SYMBOLIC in {d.action for d in program.report.decisions}
    for counts in ([3, 2, 4, 1], [10, 0, 0, 0], [0, 0, 0, 10], [1, 1, 1, 7], [0, 0, 0, 0]):
        counts = torch.tensor(counts)
        torch.testing.assert_close(program(tokens, counts), model(tokens, counts))


def test_negative_bounds_no_example_had_slice_as_python_does():
    model = NegativeStart()
    positive = torch.arange(1.0, 7.0)
    program = stitch.export(model, (positive,), examples=[((positive.flip(0),), {})])
    for x in (positive, -positive, torch.tensor([-1.0, 2, 3, -1, 5, 6]),
              torch.tensor([-1.0, -2, 3, -1, -5, 6])):
        torch.testing.assert_close(program(x), model(x))


@pytest.mark.parametrize("key", [slice(1, 3), (slice(None), slice(1, 3)), slice(None, -1)])
def test_store_slice_stores_as_setitem_in_eager(key):
    target, expected = torch.zeros(4, 4), torch.zeros(4, 4)
    value = torch.ones(expected[key].shape)
    expected[key] = value
    store_slice(target, key, value)
    assert torch.equal(target, expected)


def test_store_slice_reads_tensor_bounds_and_broadcasts_as_setitem():
    target, expected = torch.zeros(4, 3), torch.zeros(4, 3)
    expected[1:3] = torch.ones(1, 3)
    store_slice(target, slice(torch.tensor(1), torch.tensor(3)), torch.ones(1, 3))
    assert torch.equal(target, expected)


class ColumnsByCount(nn.Module):
    """The bounds in a helper, the store along the second dimension (``out[:, a:b] = v``)."""

    def forward(self, x):
        return _fill_columns(x, (x[0] > 0).sum())


def _fill_columns(x, width):
    out = torch.zeros_like(x)
    out[:, 0:width] = x[:, 0:width] + 1
    return out


def test_a_store_along_another_dimension_in_a_helper():
    x = torch.linspace(-1, 1, 24).reshape(3, 8)
    model = ColumnsByCount()
    program = stitch.export(model, (x,), examples=[((-x,), {})])
    for inp in (x, -x, torch.zeros(3, 8), x.flip(1)):
        torch.testing.assert_close(program(inp), model(inp))
