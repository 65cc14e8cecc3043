"""stitch serve (PyTriton) and a generated Triton model repository on a stock Triton server:
real servers on 127.0.0.1, real tritonclient requests, compared with the model run directly."""

from __future__ import annotations

import json
import logging
import os
import re

import numpy as np
import pytest
import torch
from serving import Server, free_ports, run_client, serve_python

import stitch
from stitch.demo_model import make_demo
from stitch.serve import write_repository

pytestmark = pytest.mark.slow
MAX_BATCH = 8


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The demo model, exported with a dynamic batch dim, saved; the inputs; what the model
    itself returns and logs for each."""
    model, args, kwargs, examples = make_demo()
    shapes = {"x": {0: torch.export.Dim("batch", min=1, max=16)}}
    program = stitch.export(model, args, kwargs, examples=examples, dynamic_shapes=shapes)
    root = tmp_path_factory.mktemp("serve")
    artifact = str(root / "demo.pt2")
    stitch.compile(program, "aoti").save(artifact)
    inputs = [args[0], *(ex[0][0] for ex in examples), args[0][:2] * 3.0]
    expected, logged = model_outputs_and_logs(model, inputs)
    np.savez(root / "inputs.npz", **{f"x{i}": x.numpy() for i, x in enumerate(inputs)})
    gates = {bool((torch.relu(model.embed(x)).mean() > 0.25).item()) for x in inputs}
    assert gates == {True, False}, "the inputs must take both sides of the model's branch"
    assert all(len(lines) == 1 for lines in logged), logged  # one log line per call
    return {"root": root, "artifact": artifact, "inputs": str(root / "inputs.npz"),
            "expected": expected, "logged": logged}


def model_outputs_and_logs(model, inputs) -> tuple[list, list]:
    """What the demo model returns and logs (``stitch.demo``) for each input."""
    expected, logged = [], []
    records = _Capture()
    logger = logging.getLogger("stitch.demo")
    logger.addHandler(records)
    old = logger.level
    logger.setLevel(logging.INFO)
    try:
        with torch.no_grad():
            for x in inputs:
                records.messages.clear()
                expected.append(model(x).numpy())
                logged.append(list(records.messages))
    finally:
        logger.removeHandler(records)
        logger.setLevel(old)
    return expected, logged


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record) -> None:
        self.messages.append(record.getMessage())


def _check(served, server: Server, name: str, model: str) -> None:
    config = {"host": "127.0.0.1", "http_port": server.http_port, "grpc_port": server.grpc_port,
              "model": model, "input": "INPUT__0", "output": "OUTPUT__0",
              "inputs": served["inputs"], "too_large": MAX_BATCH + 1,
              "out": str(served["root"] / f"{name}-out.npz")}
    path = served["root"] / f"{name}-client.json"
    path.write_text(json.dumps(config))
    run_client(str(path))
    got = np.load(config["out"])
    report = json.loads(open(config["out"] + ".json").read())
    log = server.log()
    for i, want in enumerate(served["expected"]):
        for proto in ("http", "grpc"):
            rid = f"{proto}-{i}"
            np.testing.assert_allclose(got[rid], want, rtol=1e-5, atol=1e-5, err_msg=rid)
            lines = re.findall(rf"\[request {rid}\] (hidden norm .*)", log)
            assert lines == served["logged"][i], (rid, lines, served["logged"][i])
    np.testing.assert_allclose(got["after"], served["expected"][0], rtol=1e-5, atol=1e-5)
    errors = report["errors"]
    assert "nope" in errors["wrong_name"]
    assert "FP64" in errors["wrong_dtype"] and "FP32" in errors["wrong_dtype"]
    assert "[-1,32]" in errors["wrong_shape"].replace(" ", "")
    assert f"<= {MAX_BATCH}" in errors["batch_too_large"]
    assert "AssertionError: hidden state overflowed" in errors["model_check"]
    assert "[request bad-5]" in errors["model_check"]
    assert report["live"] is True


def _serve_and_check(served, log_path, engine: str, model: str) -> str:
    """Start ``stitch serve`` with ``engine``, run the client checks, stop it by its handle
    (SIGTERM); returns the server's log after a clean exit."""
    http, grpc, metrics = free_ports(3)
    server = Server([serve_python(), "-m", "stitch", "serve", served["artifact"],
                     "--engine", engine, "--model-name", model,
                     "--http-port", str(http), "--grpc-port", str(grpc),
                     "--metrics-port", str(metrics), "--max-batch-size", str(MAX_BATCH)],
                    http, str(log_path))
    server.grpc_port = grpc
    try:
        server.wait_ready(model)
        _check(served, server, engine, model)
    finally:
        code = server.stop()
    log = server.log()
    assert code == 0, log[-3000:]
    assert "variant aoti-cpu" in log and "side-effecting" in log
    return log


def test_stitch_serve_answers_like_the_model(served):
    log = _serve_and_check(served, served["root"] / "serve.log", "pytriton", "stitched")
    assert "no GPU here" in log and '"dynamic_batching": false' in log
    assert "stopped" in log


def test_repository_engine_on_the_bundled_triton(served, tmp_path):
    """``--engine repository``: a generated model repository served by the Triton server
    binary PyTriton bundles, through Triton's own Python backend (no PyTriton code in the
    request path)."""
    _serve_and_check(served, tmp_path / "repo-serve.log", "repository", "demo")


def test_written_repository_config(served, tmp_path):
    model_dir = write_repository(served["artifact"], str(tmp_path / "repo"), model_name="demo",
                                 max_batch_size=MAX_BATCH)
    config = open(os.path.join(model_dir, "config.pbtxt")).read()
    assert f"max_batch_size: {MAX_BATCH}" in config and "dynamic_batching" not in config
    assert open(os.path.join(model_dir, "1", "model.pt2"), "rb").read() == \
        open(served["artifact"], "rb").read()
    with pytest.raises(stitch.StitchError, match="exists and is not empty"):
        write_repository(served["artifact"], str(tmp_path / "repo"), model_name="demo")
