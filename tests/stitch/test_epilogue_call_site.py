"""Replayed log records and a helper's ``warnings.warn(..., stacklevel=2)`` say the model's
file, line and function, as in eager (stitch/epilogue/call_site.py): a formatter printing
``%(lineno)d %(funcName)s`` printed the epilogue's, and two of the model's call sites merged
into one location under Python's show-once filter."""

from __future__ import annotations

import copy
import io
import logging
import warnings

import torch

import stitch

LOG = logging.getLogger("stitch.tests.call_site")


def check(message):
    warnings.warn(message, stacklevel=2)


class LogsAndWarns(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x)
        LOG.info("mean %.3f", h.mean().item())
        if h.sum() > 0:
            LOG.warning("positive")
            check("first site")
            h = h + 1
        else:
            check("second site")
        return h


def _observed(call, inputs) -> tuple[str, list[tuple[str, int, str]]]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(filename)s:%(lineno)d %(funcName)s %(message)s"))
    LOG.addHandler(handler)
    LOG.setLevel(logging.INFO)
    try:
        with warnings.catch_warnings(record=True) as caught, torch.no_grad():
            warnings.simplefilter("always")
            for x in inputs:
                call(x)
    finally:
        LOG.removeHandler(handler)
    return stream.getvalue(), [(w.filename, w.lineno, str(w.message)) for w in caught
                               if "site" in str(w.message)]


def test_records_and_warnings_carry_the_models_line():
    torch.manual_seed(0)
    model = LogsAndWarns().eval()
    x, other = torch.randn(2, 4) + 1, -torch.ones(2, 4) * 5
    program = stitch.export(copy.deepcopy(model), (x,), examples=[((other,), {})])
    inputs = (x, other, x * 2)
    eager, replayed = _observed(model, inputs), _observed(program, inputs)
    assert "forward" in eager[0] and __file__.rsplit("/", 1)[-1] in eager[0]
    assert replayed == eager
