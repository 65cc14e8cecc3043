"""A failure inside torch.export is said at the model's line being traced."""

from __future__ import annotations

import inspect

import pytest
import torch

import stitch
from capture.user_frames import user_line
from stitch.errors import ExportFailedError


def _raise_in_torch():
    torch.zeros(2).view(3)  # torch raises from its own code


def test_the_innermost_user_frame_is_named():
    try:
        _raise_in_torch()
    except RuntimeError as e:
        where = user_line(e)
    line = inspect.getsourcelines(_raise_in_torch)[1] + 1
    assert where == f"{__file__}:{line}"


class Memo(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self._cache = {}

    def forward(self, x):
        n = x.shape[0]
        if n not in self._cache:  # a dict keyed by a dynamic size
            self._cache[n] = torch.arange(n, dtype=torch.float32)[:, None]
        return x + self._cache[n]


def test_an_export_failure_names_the_models_line():
    with pytest.raises(ExportFailedError) as refused:
        stitch.export(Memo(), (torch.randn(2, 4),), examples=[((torch.randn(3, 4),), {})])
    lines, start = inspect.getsourcelines(Memo.forward)
    line = start + next(i for i, t in enumerate(lines) if "not in self._cache" in t)
    assert str(refused.value).startswith(f"{__file__}:{line}: "), str(refused.value)[:300]
