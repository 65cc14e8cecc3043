"""The request path without a server: merging requests along the batch dimension, the
row-independence probe that turns merging off, and per-request epilogue records."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from stitch.epilogue import Epilogue
from stitch.serve import ServeSpec, logs
from stitch.serve.runner import RequestRunner


def manifest():
    x = {"name": "INPUT__0", "path": "[0][0]", "dtype": "torch.float32", "shape": [-1, 4],
         "symbols": ["s0", None], "dynamic": {"0": [1, 16]}}
    return {"signature": {"inputs": [x], "outputs": [dict(x, name="OUTPUT__0", path="")]},
            "report": {"decisions": []}}


class Program:
    """Stands in for a loaded artifact: ``call`` like LoadedProgram.call."""

    epilogue = Epilogue()  # the prints are made by ``call`` itself

    def __init__(self, fn, printed=None) -> None:
        self.fn, self.printed, self.calls = fn, printed, 0

    def call(self, args, kwargs, *, printer=None):
        self.calls += 1
        out = self.fn(*args)
        if self.printed is not None and printer is not None:
            printer(f"{self.printed} {out.sum().item():.3f}\n", "stdout")
        return out


def requests(n=3):
    g = np.random.default_rng(0)
    return [{"INPUT__0": g.standard_normal((k + 1, 4)).astype(np.float32)} for k in range(n)]


def test_row_independent_model_merges_requests_and_splits_the_answer():
    program = Program(lambda x: torch.relu(x) * 2)
    runner = RequestRunner(program, ServeSpec.from_manifest(manifest()))
    runner.probe_row_independence()
    assert runner.spec.batching.dynamic_batching
    reqs = requests()
    program.calls = 0
    merged = runner.run_merged(reqs, ["a", "b", "c"])
    assert program.calls == 1  # one call for three requests
    for req, got in zip(reqs, merged, strict=True):
        np.testing.assert_allclose(got["OUTPUT__0"], np.maximum(req["INPUT__0"], 0) * 2)


def test_batch_mixing_model_is_caught_by_the_probe_and_served_per_request(caplog):
    program = Program(lambda x: x - x.mean(0))  # each row depends on the others
    runner = RequestRunner(program, ServeSpec.from_manifest(manifest()))
    with caplog.at_level(logging.WARNING, logger="stitch.serve"):
        runner.probe_row_independence()
    assert not runner.spec.batching.dynamic_batching
    assert "changes with the other rows" in runner.spec.batching.reason
    assert any("changes with the other rows" in r.getMessage() for r in caplog.records)
    reqs = requests()
    program.calls = 0
    out = runner.run_merged(reqs, ["a", "b", "c"])
    assert program.calls == 3
    for req, got in zip(reqs, out, strict=True):
        x = req["INPUT__0"]
        np.testing.assert_allclose(got["OUTPUT__0"], x - x.mean(0), rtol=1e-6, atol=1e-6)


@pytest.fixture
def tagged_records(monkeypatch):
    """The server's record factory for this test only (it is process-wide)."""
    monkeypatch.setattr(logs, "_installed", False)
    previous = logging.getLogRecordFactory()
    logs.tag_records()
    yield
    logging.setLogRecordFactory(previous)


def test_epilogue_prints_become_records_with_the_request_id(caplog, tagged_records):
    program = Program(lambda x: x * 1.0, printed="sum is")
    runner = RequestRunner(program, ServeSpec.from_manifest(manifest(), epilogue_calls=1))
    with caplog.at_level(logging.INFO, logger=logs.EPILOGUE_LOGGER):
        for rid, req in zip(["r-1", "r-2"], requests(2), strict=True):
            runner(req, rid)
    records = [(r.request_id, r.getMessage()) for r in caplog.records
               if r.name == logs.EPILOGUE_LOGGER]
    want = [(rid, f"sum is {req['INPUT__0'].sum():.3f}")
            for rid, req in zip(["r-1", "r-2"], requests(2), strict=True)]
    assert records == want
