"""Small models with data-dependent checks, and a helper, shared by tests of several
stages."""

from __future__ import annotations

import contextlib
import io
import logging

import torch


def said(fn, x, caplog, logger: str):
    """``fn(x)`` without grad, with what it printed and what ``logger`` logged (WARNING+)."""
    out = io.StringIO()
    caplog.clear()
    with contextlib.redirect_stdout(out), torch.no_grad(), \
            caplog.at_level(logging.WARNING, logger=logger):
        value = fn(x)
    return value, out.getvalue(), [r.getMessage() for r in caplog.records]


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
