"""Small models with data-dependent checks, shared by tests of several stages."""

from __future__ import annotations

import torch


class CheckInBranch(torch.nn.Module):
    """An assert inside a data-dependent branch: it stays in the cond's arm."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0:
            assert h.abs().max().item() < 100, "scale too large in branch"
            h = h * 2
        return h
