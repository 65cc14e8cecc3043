"""TensorRT plan (no GPU needed), CUDA-graph capturability checks, GPU-only paths."""

from __future__ import annotations

import functools

import pytest
import torch

import stitch
from stitch.lower.cudagraphs import CudaGraphRunner, capture_blockers, move_scalars_to


@functools.cache
def demo_program():
    from stitch.zoo.demo_model import make_demo

    model, args, kwargs, examples = make_demo()
    return stitch.export(model, args, kwargs, examples=examples)


@pytest.mark.slow
def test_tensorrt_plan_without_gpu_keeps_cond_in_pytorch():
    plan = stitch.tensorrt_plan(demo_program())
    assert 0 < plan.ops_supported < plan.ops_total
    assert "cond" in plan.unsupported  # no TensorRT converter for torch.cond
    engines = [s.engine for s in plan.segments]
    assert "tensorrt" in engines and "pytorch" in engines
    cond_segment = next(s for s in plan.segments if "cond" in s.ops)
    assert cond_segment.engine == "pytorch" and "no converter" in cond_segment.why
    assert "TensorRT plan:" in str(plan)
    assert plan.gpu is torch.cuda.is_available()
    # the stub that lets torch_tensorrt import without a GPU stayed in the subprocess
    assert torch.cuda.get_device_capability.__module__ == "torch.cuda"


def test_capture_blockers_name_cpu_inputs():
    reasons = capture_blockers(demo_program().exported_program, device="cuda")
    assert any("is on cpu" in r for r in reasons)


def test_capture_blockers_name_dynamic_shapes_and_host_syncs():
    class M(torch.nn.Module):
        def forward(self, x):
            return x * x.sum().item()

    batch = torch.export.Dim("batch")
    ep = torch.export.export(M(), (torch.randn(4, 3),), dynamic_shapes=({0: batch},))
    reasons = capture_blockers(ep, device="cpu")
    assert any("dynamic shape" in r for r in reasons)
    assert any("_local_scalar_dense" in r or "item" in r for r in reasons)


def test_move_scalars_to_device_rewrites_factory_ops():
    class M(torch.nn.Module):
        def forward(self, x):
            return x + torch.full((), 2.0, device="cpu")

    gm = torch.export.export(M(), (torch.randn(3),)).module()
    moved = move_scalars_to(gm, "cuda")
    assert moved == 1
    devices = [n.kwargs.get("device") for n in gm.graph.nodes
               if n.op == "call_function" and "full" in str(n.target)]
    assert devices == [torch.device("cuda")]


def test_cudagraphs_refused_clearly_without_gpu():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(stitch.StitchError, match="CUDA device"):
        stitch.compile(demo_program(), "eager", cudagraphs=True)


@pytest.mark.gpu
def test_cudagraph_runner_replays_on_gpu():
    model = torch.nn.Linear(8, 8).cuda()
    from capture.inputs import Example

    x = torch.randn(4, 8, device="cuda")
    runner = CudaGraphRunner(model, Example((x,), {}))
    y = torch.randn(4, 8, device="cuda")
    torch.testing.assert_close(runner(y), model(y))


@pytest.mark.gpu
def test_tensorrt_backend_matches_eager_on_gpu():
    compiled = stitch.compile(demo_program(), "tensorrt")
    for ex in demo_program().examples:
        args = [a.cuda() for a in ex.args]
        torch.testing.assert_close(compiled(*args).cpu(), demo_program()(*ex.args))
