"""Inputs for test models that keep the rows a Linear scores above 0 (a count known only at
run time): one keeping some rows, one keeping none."""

from __future__ import annotations

import torch


def some_and_none(lin: torch.nn.Linear, rows: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    """(x, none_kept): ``lin(x)[:, 0]`` has positive entries; ``lin(none_kept)[:, 0] < 0``."""
    x = torch.randn(rows, lin.in_features, generator=torch.Generator().manual_seed(1))
    w, b = lin.weight[0].detach(), lin.bias[0].detach()
    none_kept = (-w / w.dot(w) * (b.abs() + 10)).expand(rows, lin.in_features).clone()
    return x, none_kept


class KeepsRows(torch.nn.Module):
    """A Linear whose first output column decides which rows are kept (``some_and_none``)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(6, 6)


def regroup_rows(rows):
    if rows.shape[0] > 0:  # the sides differ in rank: the caller's rest goes into each arm
        return rows.reshape(rows.shape[0], -1, 2)
    return rows


class SplitsByKeptCounts(KeepsRows):
    """torchvision's ``postprocess_detections`` shape: counts read from sizes a data-dependent
    filter gave (unbacked, ``Min(3, u0)`` after a cap), used by the rest of the caller."""

    def forward(self, x):
        h = self.lin(x)
        rows = h[(h[:, 0] > 0).nonzero()[:, 0]][:3]
        per_image = [rows.shape[0]]
        out = regroup_rows(rows)
        return out.reshape(rows.shape[0], 6).split(per_image, 0)[0] * 2
