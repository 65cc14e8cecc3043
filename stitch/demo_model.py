"""The demo model: a small gated encoder that breaks in several typical ways.

``stitch demo`` runs it; ``stitch export stitch.demo_model:make_demo`` exports it. Capture
treats this file as user code (``capture.source.is_user_file``), as it would the user's.
"""

from __future__ import annotations

import logging

import torch
from torch import nn

logger = logging.getLogger("stitch.demo")


class GatedEncoder(nn.Module):
    """A model like many real ones: a flag read from data, a branch, a log line, a check."""

    def __init__(self, width: int = 32) -> None:
        super().__init__()
        self.embed = nn.Linear(width, width)
        self.gate = nn.Linear(width, width)
        self.out = nn.Linear(width, width)

    def forward(self, x):
        h = torch.relu(self.embed(x))
        use_gate = (h.mean() > 0.25).item()  # BREAK: scalar_read
        if use_gate:
            h = h * torch.sigmoid(self.gate(h))
        else:
            h = h + 1.0
        logger.info("hidden norm %.3f", h.norm())  # BREAK: side_effect
        assert h.abs().max().item() < 1e4, "hidden state overflowed"  # BREAK: assert
        return self.out(h)


def make_demo():
    torch.manual_seed(0)
    model = GatedEncoder().eval()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 32, generator=g)
    return model, (x,), {}, [((x * 0.0 - 5.0,), {}), ((x.abs() + 2.0,), {})]
