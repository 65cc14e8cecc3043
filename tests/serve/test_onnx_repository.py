"""An ONNX artifact in a Triton model repository: served by the bundled Triton server through
its Python backend (ONNX Runtime inside), with the same client checks as the .pt2; the stock
onnxruntime_onnx + TensorRT pipeline is written (not served here: no ONNX Runtime backend in
the bundled server, no GPU)."""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest
import test_server as pt2
import torch
from serving import Server, free_ports, serve_python

import stitch
from stitch.demo_model import make_demo
from stitch.serve import write_repository

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(importlib.util.find_spec("onnxruntime") is None,
                                 reason="the onnx extra is not installed")]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    model, args, kwargs, examples = make_demo()
    shapes = {"x": {0: torch.export.Dim("batch", min=1, max=16)}}
    program = stitch.export(model, args, kwargs, examples=examples, dynamic_shapes=shapes)
    root = tmp_path_factory.mktemp("serve-onnx")
    artifact = str(root / "demo.onnx")
    program.save(artifact)
    inputs = [args[0], *(ex[0][0] for ex in examples), args[0][:2] * 3.0]
    expected, logged = pt2.model_outputs_and_logs(model, inputs)
    np.savez(root / "inputs.npz", **{f"x{i}": x.numpy() for i, x in enumerate(inputs)})
    return {"root": root, "artifact": artifact, "inputs": str(root / "inputs.npz"),
            "expected": expected, "logged": logged}


def test_onnx_repository_on_the_bundled_triton(served, tmp_path):
    http, grpc, metrics = free_ports(3)
    server = Server([serve_python(), "-m", "stitch", "serve", served["artifact"],
                     "--engine", "repository", "--model-name", "demo",
                     "--http-port", str(http), "--grpc-port", str(grpc),
                     "--metrics-port", str(metrics), "--max-batch-size", str(pt2.MAX_BATCH)],
                    http, str(tmp_path / "onnx-serve.log"))
    server.grpc_port = grpc
    try:
        server.wait_ready("demo")
        pt2._check(served, server, "onnx", "demo")
    finally:
        code = server.stop()
    log = server.log()
    assert code == 0, log[-3000:]
    assert "variant onnxruntime-cpu" in log


def test_stock_onnx_pipeline_is_written(served, tmp_path):
    repo = str(tmp_path / "repo")
    write_repository(served["artifact"], repo, model_name="demo", stock_onnx=True)
    assert open(os.path.join(repo, "demo", "1", "model.onnx"), "rb").read() == \
        open(served["artifact"], "rb").read()
    graph = open(os.path.join(repo, "demo_graph", "config.pbtxt")).read()
    assert 'platform: "onnxruntime_onnx"' in graph and 'name: "tensorrt"' in graph
    assert "KIND_GPU" in graph
    pipeline = open(os.path.join(repo, "demo_pipeline", "config.pbtxt")).read()
    assert 'platform: "ensemble"' in pipeline
    assert 'model_name: "demo_graph"' in pipeline and 'model_name: "demo_epilogue"' in pipeline
    assert 'value: "INPUT__0"' in pipeline and 'name: "OUTPUT__0"' in pipeline
    assert "EpilogueTritonModel" in open(
        os.path.join(repo, "demo_epilogue", "1", "model.py")).read()
