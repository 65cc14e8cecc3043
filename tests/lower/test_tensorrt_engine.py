"""TensorRT engines through ONNX: built here without a GPU (TensorRT-RTX), with the layer kinds
torch.cond and torch.while_loop should give; refusals name the node. Running an engine
needs a GPU: that test is gpu-marked and skips here (built, not run)."""

from __future__ import annotations

import functools
import importlib.util
import json

import pytest
import torch
from conftest import zoo_program

import stitch
from stitch.deploy.tensorrt_engine import tensorrt_engine

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("tensorrt_rtx") is None
                       and importlib.util.find_spec("tensorrt") is None,
                       reason="neither tensorrt-rtx nor tensorrt is installed"),
    pytest.mark.skipif(importlib.util.find_spec("onnxscript") is None,
                       reason="the onnx extra is not installed"),
]


@functools.cache
def engine(name: str):
    return tensorrt_engine(zoo_program(name))


@pytest.mark.slow
@pytest.mark.parametrize("name, conditionals", [
    ("branch_on_tensor", 1), ("elif_chain", 2), ("effects_in_nested_branches", 3)])
def test_branch_programs_give_if_conditional_layers(name, conditionals):
    built = engine(name)
    assert built.built and built.bytes > 0 and not built.ran
    assert built.conditionals == conditionals
    assert {"CONDITION", "CONDITIONAL_INPUT", "CONDITIONAL_OUTPUT"} <= set(built.layers)
    assert "built, not run" in str(built)


@pytest.mark.slow
def test_the_loop_program_gives_loop_layers():
    built = engine("tensor_counted_loop")
    assert built.built and built.loops == 1
    assert {"TRIP_LIMIT", "RECURRENCE", "LOOP_OUTPUT"} <= set(built.layers)
    assert built.conditionals == 0


@pytest.mark.slow
def test_dynamic_batch_gives_an_optimization_profile():
    from tests.zoo import make

    model, args, kwargs, examples = make("branch_on_tensor")
    batch = torch.export.Dim("batch", min=1, max=16)
    program = stitch.export(model, args, kwargs, examples=examples,
                            dynamic_shapes={"x": {0: batch}})
    built = tensorrt_engine(program)
    assert built.built
    (name, (low, opt, high)), = built.profiles.items()
    assert low[0] == 1 and high[0] == 16 and opt[0] == args[0].shape[0]


@pytest.fixture
def nonzero_onnx(tmp_path):
    """A one-node ONNX file whose NonZero the TensorRT parser refuses."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("NonZero", ["x"], ["idx"], name="find_tokens")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("idx", TensorProto.INT64, [1, None])])
    path = tmp_path / "nonzero.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    return path


def test_a_parser_refusal_names_the_node_and_what_runs_instead(nonzero_onnx):
    path = nonzero_onnx
    built = tensorrt_engine(str(path))
    assert not built.built and built.path is None
    refusal, = built.refusals
    assert refusal.node == "find_tokens" and refusal.operator == "NonZero" and refusal.why
    assert "instead: ONNX Runtime" in str(built)


def test_cli_engine_reports_the_refusal(nonzero_onnx, capsys):
    from stitch.cli import main

    path = nonzero_onnx
    assert main(["engine", str(path), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["refusals"][0]["node"] == "find_tokens" and report["path"] is None


@pytest.mark.slow
def test_tensorrt_plan_shows_the_onnx_route_beside_torch_tensorrt():
    plan = stitch.tensorrt_plan(zoo_program("branch_on_tensor"))
    assert "cond" in plan.unsupported  # Torch-TensorRT: cond in a PyTorch segment
    assert plan.onnx_route is not None and plan.onnx_route.conditionals == 1
    assert "TensorRT engine via ONNX" in str(plan)


@pytest.mark.gpu
def test_engine_runs_and_matches_onnxruntime_on_a_gpu():  # pragma: no cover - GPU only
    """Unverified here: no GPU. Deserializes the engine and compares it with ONNX Runtime."""
    trt = pytest.importorskip("tensorrt_rtx")
    built = engine("branch_on_tensor")
    runtime = trt.Runtime(trt.Logger(trt.Logger.WARNING))
    with open(built.path, "rb") as f:
        cuda_engine = runtime.deserialize_cuda_engine(f.read())
    assert cuda_engine is not None
    compiled = stitch.compile(zoo_program("branch_on_tensor"), "onnxruntime")
    context = cuda_engine.create_execution_context()
    program = compiled.program
    for ex in program.examples:
        x = ex.args[0].cuda().contiguous()
        names = [cuda_engine.get_tensor_name(i) for i in range(cuda_engine.num_io_tensors)]
        outputs = {}
        for name in names:
            if cuda_engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT:
                context.set_tensor_address(name, x.data_ptr())
            else:
                shape = tuple(context.get_tensor_shape(name))
                outputs[name] = torch.empty(shape, device="cuda")
                context.set_tensor_address(name, outputs[name].data_ptr())
        assert context.execute_async_v3(torch.cuda.current_stream().cuda_stream)
        torch.cuda.synchronize()
        want = compiled(*ex.args)
        got = next(iter(outputs.values())).cpu()
        torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-4)
