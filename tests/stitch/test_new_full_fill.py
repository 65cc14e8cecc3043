"""``t.new_full(size, fill)`` with a 0-d tensor as the fill, in a cond arm whose sizes come
from data (torch_geometric's ``SortAggregation`` pads its sorted nodes with
``batch_x.new_full((B, self.k - N, D), fill_value)``): the op reads the fill as a Python
number, which torch.export cannot carry out of the arm; stitch's stand-in broadcasts the fill
in the result's dtype (``shims._new_full``)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import stitch
from stitch.synthesize.operators.shims import _new_full


class PadToK(nn.Module):
    """Keep the first ``k`` rows, padding with a value below every row when fewer are kept."""

    def forward(self, x, counts):
        k = int(counts.max())
        fill = x.min() - 1
        if k >= 4:
            y = x[:4]
        else:
            y = torch.cat([x[:k], x.new_full((4 - k, x.shape[1]), fill)])
        return y


def test_a_fill_from_data_in_an_arm_sized_from_data_is_one_program():
    model = PadToK()
    x = torch.randn(6, 3)
    program = stitch.export(model, (x, torch.tensor([2])),
                            examples=[((x, torch.tensor([5])), {})])
    assert program.report.graphs_after == 1, str(program.report)
    for k in (0, 2, 4, 6):
        counts, x = torch.tensor([k]), torch.randn(6, 3)
        assert torch.equal(program(x, counts), model(x, counts))


@pytest.mark.parametrize("dtype", [None, torch.float16, torch.int32, torch.bool])
def test_the_stand_in_equals_the_op(dtype):
    x = torch.randn(3, 2)
    fill = x.min() - 1.7
    kwargs = {} if dtype is None else {"dtype": dtype}
    got, want = _new_full(x, (2, 3), fill, **kwargs), x.new_full((2, 3), fill, **kwargs)
    assert torch.equal(got, want) and got.dtype == want.dtype and got.is_contiguous()
    assert _new_full(x, (), fill).shape == ()
    grad = torch.randn((), requires_grad=True)
    assert not _new_full(x, (2,), grad).requires_grad  # the op takes no gradient through it
