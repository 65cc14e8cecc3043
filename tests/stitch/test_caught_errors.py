"""A model that catches a runtime error (``try: cholesky(a) except RuntimeError: ...``)
cannot be one program that catches it; the refusal names the ``try`` and what to write."""

from __future__ import annotations

import inspect

import pytest
import torch

import stitch
from stitch.errors import VerificationError


class Jittered(torch.nn.Module):
    def forward(self, a):
        try:
            return torch.linalg.cholesky(a)
        except RuntimeError:
            return torch.linalg.cholesky(a + 1e-3 * torch.eye(a.shape[-1]))


def test_the_refusal_names_the_try_that_catches_the_programs_error():
    with pytest.raises(VerificationError) as refused:
        stitch.export(Jittered(), (torch.eye(3) * 2,), examples=[((torch.zeros(3, 3),), {})])
    lines, start = inspect.getsourcelines(Jittered)
    line = start + next(i for i, text in enumerate(lines) if text.strip() == "try:")
    notes = "\n".join(getattr(refused.value, "__notes__", []))
    assert f"{inspect.getsourcefile(Jittered)}:{line} (try/except)" in notes, notes
    assert "cholesky_ex" in notes
