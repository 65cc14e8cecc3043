"""A conditional expression whose arm reads a tensor as a number, on a test decided before
it (a size), breaks at the read: a scalar read, not a branch
(``int(index.max()) + 1 if index.numel() > 0 else 0``: torch-geometric's aggregations)."""

import torch

from capture import BreakKind, explain


class ReadInArm(torch.nn.Module):
    def forward(self, x, index):
        size = int(index.max()) + 1 if index.numel() > 0 else 0
        return x.new_zeros(size, x.shape[1]).index_add(0, index, x)


class ReadInTest(torch.nn.Module):
    def forward(self, x, index):
        size = index.numel() if int(index.max()) > 3 else 0
        return x * size


def _kinds(model) -> set:
    x, index = torch.randn(6, 4), torch.tensor([0, 2, 1, 5, 5, 2])
    return {s.kind for s in explain(model, (x, index)).sites}


def test_a_read_in_an_arm_is_a_scalar_read():
    assert _kinds(ReadInArm()) == {BreakKind.SCALAR_READ}


def test_a_read_in_the_test_is_a_branch():
    assert BreakKind.BRANCH in _kinds(ReadInTest())
