"""Every exportable zoo case through the Inductor and AOTInductor backends: outputs, printed
text and logs equal to the eager model's on every example (both branch sides), run in the
model's order on fresh state (stateful cases mutate buffers)."""

from __future__ import annotations

import contextlib
import io
import logging

import pytest
import torch
from conftest import zoo_program

import stitch
from tests.zoo import CASES, make

UNFIXABLE = {"nonzero_gather", "calls_disabled"}
NAMES = sorted(n for n in CASES if n not in UNFIXABLE)


def matches_the_model(compiled, name: str, caplog) -> None:
    """``compiled`` returns, raises, prints and logs what the zoo model ``name`` does, on
    every example."""
    model, args, kwargs, examples = make(name)
    for a, k in [(args, kwargs), *examples]:
        got, got_out, got_logs = _run(compiled, a, k, caplog)
        want, want_out, want_logs = _run(model, a, k, caplog)
        if isinstance(want, tuple) and isinstance(want[0], type):
            assert got == want
        else:
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
        assert (got_out, got_logs) == (want_out, want_logs)


def _run(fn, a, k, caplog):
    out = io.StringIO()
    caplog.clear()
    with contextlib.redirect_stdout(out), torch.no_grad(), \
            caplog.at_level(logging.INFO, logger="tests.zoo"):
        try:
            result = fn(*a, **k)
        except Exception as e:  # noqa: BLE001 - the same exception is expected of both
            result = (type(e), str(e))
    return result, out.getvalue(), [r.getMessage() for r in caplog.records]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["inductor", "aoti"])
@pytest.mark.parametrize("name", NAMES)
def test_backend_matches_the_model(name, backend, caplog):
    program = zoo_program(name)
    compiled = stitch.compile(program, backend)
    assert compiled.backend == backend
    matches_the_model(compiled, name, caplog)
