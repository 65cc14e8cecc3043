"""Models asserting on values read from data, for test_read_asserts.py (outside a test
module, so pytest leaves their ``assert`` statements as written)."""

from __future__ import annotations

import torch


class Asserts(torch.nn.Module):
    def forward(self, x, lengths):
        assert lengths.max().item() <= 8
        return x * 2


class AssertsWithMessage(torch.nn.Module):
    def forward(self, x, lengths):
        assert lengths.max().item() <= 8, "too long"
        return x * 2


class ComputesWithRead(torch.nn.Module):
    def forward(self, x, lengths):
        n = lengths.max().item()
        assert n <= 8
        return x * (n * 3)


def _check_lengths(lengths: torch.Tensor, width: int) -> torch.Tensor:
    assert lengths.max().item() <= width
    assert lengths.min().item() >= 0
    return torch.arange(width)[None] < lengths[:, None]


class AssertsInHelper(torch.nn.Module):
    """XLM's spelling: the asserts in a module-level helper the forward calls."""

    def forward(self, x, lengths):
        mask = _check_lengths(lengths, 8)
        return x * mask


class Checks(torch.nn.Module):
    def forward(self, x, lengths):
        torch._check(lengths.max().item() <= 8)
        return x * 2


class Checker:
    """Another object's method holds the assert."""

    def check(self, lengths: torch.Tensor, width: int) -> None:
        assert lengths.max().item() <= width


class AssertsInAnotherObject(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.checker = Checker()

    def forward(self, x, lengths):
        self.checker.check(lengths, x.shape[-1])
        return x * 2


class AssertsInALoop(torch.nn.Module):
    def forward(self, x, lengths):
        for row in lengths.unbind(0):  # one check per row
            assert row.item() <= 8
        return x * 2
