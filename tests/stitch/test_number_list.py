"""A Python list of numbers grown by ``.tolist()`` of tensors sized from data and made a
tensor at the end (transformers' ``get_vision_window_index``: windows' cumulative sizes per
image of a grid given as data) is a tensor while traced (``synthesize/convert/number_list.py``), and
``int()`` of a number known only at run time stays symbolic (``len_to_size.py``): a program
for every grid of the inputs' shapes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import stitch
from stitch.synthesize.operators.rt_number_lists import (
    numbers,
    numbers_append,
    numbers_extend,
    numbers_tensor,
)


class WindowOrder(nn.Module):
    """Each image's patches in windows of 3 columns: their order and the windows' bounds."""

    def forward(self, x, grid):
        order = []
        bounds: list = [0]
        offset = 0
        for t, h, w in grid.tolist():
            t, h, w = int(t), int(h), int(w)
            index = torch.arange(t * h * w).reshape(t, h, w)
            pad = 3 - w % 3
            windows = (w + pad) // 3
            padded = F.pad(index, (0, pad), "constant", -1).reshape(t, h, windows, 3)
            padded = padded.permute(0, 2, 1, 3).reshape(t, windows, h * 3)
            sizes = (padded != -1).sum(-1).reshape(-1)
            flat = padded.reshape(-1)
            order.append(flat[flat != -1] + offset)
            bounds.extend((sizes.cumsum(0) + bounds[-1]).tolist())
            offset += t * h * w
        order = torch.cat(order)
        bounds = torch.tensor(bounds, dtype=torch.int32)
        bounds = torch.unique_consecutive(bounds)
        return x[order] * 2, bounds


def _inputs(seed: int, grid):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(24, 4, generator=g), torch.tensor(grid)


def test_window_bounds_are_one_graph_for_every_grid():
    model = WindowOrder()
    with pytest.raises(Exception, match="data-dependent"):  # the premise
        torch.export.export(model, _inputs(0, [[1, 4, 6]]), strict=False)
    program = stitch.export(model, _inputs(0, [[1, 4, 6]]),
                            examples=[(_inputs(1, [[1, 4, 6]]), {})])
    assert program.report.graphs_after == 1, str(program.report)
    reasons = " ".join(d.reason for d in program.report.decisions)
    assert "the list `bounds` of numbers" in reasons, reasons
    assert "int() of a number known only at run time" in reasons, reasons
    for seed, grid in enumerate(([[2, 3, 4]], [[1, 2, 12]], [[1, 24, 1]], [[3, 2, 4]],
                                 [[1, 3, 8]], [[24, 1, 1]]), 2):
        args = _inputs(seed, grid)
        got, want = program(*args), model(*args)
        assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True)), grid


class KeepsTheList(nn.Module):
    def forward(self, x, counts):
        counts = counts[counts > 0]
        bounds = [0]
        bounds.extend(counts.cumsum(0).tolist())
        return x * len(bounds), bounds  # the list itself returned: left as written


def test_a_list_that_escapes_is_left_and_refused_naming_the_line():
    x, counts = torch.randn(3), torch.tensor([1, 0, 2])
    with pytest.raises(stitch.StitchError) as caught:
        stitch.export(KeepsTheList(), (x, counts))
    message = str(caught.value)
    assert "test_number_list.py:" in message and "the list `bounds`" not in message, message


def test_the_helpers_in_eager_are_the_list_operations():
    values = numbers([0])
    assert values == [0]
    assert numbers_extend(values, torch.tensor([3, 4])) is values and values == [0, 3, 4]
    assert numbers_append(values, 5) is values and values == [0, 3, 4, 5]
    assert torch.equal(numbers_tensor(values, dtype=torch.int32),
                       torch.tensor([0, 3, 4, 5], dtype=torch.int32))


def test_the_traced_helpers_give_what_the_list_gives():
    """As a tensor: the same numbers, the dtype torch.tensor of the list would give."""
    values = torch.tensor([0])
    values = numbers_extend(values, torch.tensor([[3], [4]]))
    values = numbers_append(values, torch.tensor(5))
    assert values.tolist() == [0, 3, 4, 5] and values.dtype == torch.int64
    assert numbers_tensor(values).dtype == torch.int64
    floats = numbers_extend(values, torch.tensor([0.5]))
    assert floats.tolist() == [0, 3, 4, 5, 0.5]
    assert numbers_tensor(floats).dtype == torch.get_default_dtype()
    assert numbers_tensor(floats).tolist() == torch.tensor([0, 3, 4, 5, 0.5]).tolist()


class RoundsTheLastUp(nn.Module):
    """``end = bounds[-1]; end += ...``: a Python number in eager; while traced the read is a
    copy (a view would let `+=` write into the list)."""

    def forward(self, x, grid):
        bounds = [0]
        for t, w in grid.tolist():
            t, w = int(t), int(w)
            sizes = torch.full((t,), w)
            bounds.extend((sizes.cumsum(0) + bounds[-1]).tolist())
        end = bounds[-1]
        end += (-end) % 8
        bounds.append(end)
        bounds = torch.tensor(bounds)
        return x * 2, bounds


def test_a_read_of_the_list_is_a_copy():
    model = RoundsTheLastUp()
    x = torch.randn(3)
    try:  # examples whose totals are multiples of 8: the view went unseen there
        program = stitch.export(model, (x, torch.tensor([[2, 4]])),
                                examples=[((x, torch.tensor([[1, 8]])), {})])
    except stitch.StitchError as refused:
        assert "test_number_list.py:" in str(refused), str(refused)
        return
    for grid in ([[1, 7]], [[2, 3]], [[3, 5]]):
        got, want = program(x, torch.tensor(grid)), model(x, torch.tensor(grid))
        assert torch.equal(got[1], want[1]), (grid, got[1], want[1])
