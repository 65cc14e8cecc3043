"""TensorRT plan (no GPU needed), CUDA-graph capturability checks, GPU-only paths."""

from __future__ import annotations

import functools

import pytest
import torch

import stitch
from stitch.lower.cudagraphs import (
    CudaGraphRunner,
    capture_blockers,
    move_scalars_to,
    mutated_buffers,
)


@functools.cache
def demo_program():
    from stitch.demo_model import make_demo

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


def test_mutated_buffers_finds_in_place_updates_the_signature_does_not_list():
    """torch 2.14's export keeps ``copy_`` on buffers and leaves buffers_to_mutate empty; a
    CUDA graph warm-up would advance such buffers, so they must be found in the graph."""
    from tests.zoo import make

    model, args, _, examples = make("buffer_in_branch")
    ep = stitch.export(model, args, examples=examples).exported_program
    assert mutated_buffers(ep) == ["model.hits", "model.running"]
    assert mutated_buffers(demo_program().exported_program) == []
    # the cond picks its branch on the host: capture would be invalidated (seen on an H100)
    assert capture_blockers(ep, device="cpu") == [
        "torch.cond reads its predicate on the host to choose what runs, which a CUDA graph "
        "cannot capture"]


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
    pytest.importorskip("torch_tensorrt", reason="torch_tensorrt is not installed: pip install "
                        "'torch-stitch[tensorrt]' on the GPU machine")
    compiled = stitch.compile(demo_program(), "tensorrt")
    for ex in demo_program().examples:
        args = [a.cuda() for a in ex.args]
        torch.testing.assert_close(compiled(*args).cpu(), demo_program()(*ex.args))


def _on_cuda(name: str):
    from tests.zoo import make

    model, args, kwargs, examples = make(name)
    cuda = lambda ts: tuple(t.cuda() for t in ts)  # noqa: E731
    return model.cuda(), cuda(args), [(cuda(a), k) for a, k in examples]


@pytest.mark.gpu
def test_failing_check_on_cuda_raises_the_models_error_and_the_context_survives():
    """In-graph, a failed check on CUDA is a device-side assert that ends the process's CUDA
    context; on CUDA the epilogue raises it instead (Settings.checks='auto')."""
    model, args, examples = _on_cuda("assert_finite")
    program = stitch.export(model, args, examples=examples)
    assert [e.kind for e in program.epilogue.entries] == ["check"]
    bad = args[0].clone()
    bad[0, 0] = float("inf")
    for backend, graphs in [("eager", False), ("inductor", True)]:
        compiled = stitch.compile(program, backend, cudagraphs=graphs)
        with pytest.raises(AssertionError, match="activations overflowed"):
            compiled(bad)
        torch.testing.assert_close(compiled(*args), model(*args))  # the context still works


@pytest.mark.gpu
def test_auto_selection_on_gpu_times_cudagraph_variants():
    model, args, examples = _on_cuda("branch_on_item")
    program = stitch.export(model, args, examples=examples)
    compiled = stitch.compile(program, "auto")
    from stitch.lower.aoti_probe import aoti_load_failure

    names = {c.name: c for c in compiled.decision.candidates}
    expected = ["eager+cudagraphs", "inductor+cudagraphs"]
    if aoti_load_failure("cuda") is None:
        expected.append("aoti+cudagraphs")
    else:  # this torch crashes loading CUDA packages: reported, not built, not crashed on
        assert not names["aoti"].available and "does not load" in names["aoti"].reason
    assert all(names[n].available and names[n].correct for n in expected), names
    chosen = names[compiled.decision.chosen]
    assert chosen.median_ms <= names["eager"].median_ms
    for a, k in [(args, {}), *examples]:
        torch.testing.assert_close(compiled(*a, **k), model(*a, **k))


@pytest.mark.gpu
def test_cudagraphs_refused_with_the_reason_for_a_graph_that_updates_buffers():
    model, args, examples = _on_cuda("buffer_in_branch")
    program = stitch.export(model, args, examples=examples)
    with pytest.raises(stitch.StitchError, match="updates buffers"):
        stitch.compile(program, "eager", cudagraphs=True)


@pytest.mark.gpu
def test_conds_are_predicated_so_the_graph_replays_from_cuda_graphs():
    """torch.cond reads its predicate on the host, which invalidates a capture (seen on an
    H100); pure conds select with torch.where instead and the graph is captured."""
    model, args, examples = _on_cuda("branch_on_tensor")
    program = stitch.export(model, args, examples=examples)
    for backend in ("eager", "inductor"):
        compiled = stitch.compile(program, backend, cudagraphs=True)
        assert compiled.decision.chosen == f"{backend}+where+cudagraphs"
        x = args[0]
        for a, k in [(args, {}), *examples, ((x * -10,), {}), ((x * 10,), {})]:
            torch.testing.assert_close(compiled(*a, **k), model(*a, **k))


def test_onnxruntime_is_refused_cuda_graph_capture_with_the_reason():
    """ONNX Runtime runs outside torch's stream (host memory then; its own CUDA stream now):
    capturing it failed on an H100 with "Cannot copy between CPU and CUDA tensors during CUDA
    graph capture". The variant is
    refused before any capture, with that reason (checked without a GPU: it comes first)."""
    from stitch.deploy.graph_replay import cudagraph_variant
    from stitch.lower import build
    from tests.zoo import make

    model, args, kwargs, examples = make("print_stats")
    program = stitch.export(model, args, kwargs, examples=examples)
    built = build("onnxruntime", program, program.example)
    with pytest.raises(stitch.StitchError, match="ONNX Runtime runs the graph outside"):
        cudagraph_variant(program, built, [program.example])


def test_a_failed_cuda_graph_capture_is_refused_with_the_reason(monkeypatch):
    """An AOTInductor package replayed from CUDA graphs failed mid-capture on an H200
    (torch 2.11) with torch's raw "operation failed due to a previous error during capture";
    a capture that fails for any reason is a StitchError that names the backend and the fix
    (checked without a GPU: the runner stands in for the capture)."""
    from stitch.deploy import graph_replay
    from stitch.lower import build
    from tests.zoo import make

    class FailingCapture:
        def __init__(self, fn):
            self.fn = fn

        def capture(self, args, kwargs):
            raise RuntimeError("CUDA error: operation failed due to a previous error during "
                               "capture\nSearch for `cudaErrorStreamCaptureInvalidated'")

    model, args, kwargs, examples = make("print_stats")
    program = stitch.export(model, args, kwargs, examples=examples)
    built = build("eager", program, program.example)
    monkeypatch.setattr(graph_replay, "CudaGraphRunner", FailingCapture)
    monkeypatch.setattr(graph_replay, "capture_blockers", lambda ep, device: [])  # CPU here
    with pytest.raises(stitch.StitchError, match=r"capturing the eager graph in a CUDA graph "
                       r"failed: RuntimeError: CUDA error: operation failed.*cudagraphs=False"):
        graph_replay.cudagraph_variant(program, built, [program.example])


def test_aoti_probe_names_the_libstdcxx_preload_that_mends_a_crash(monkeypatch):
    """On an H200 with torch 2.11 a CUDA package died loading (signal 11, std::regex in its
    wrapper) and loaded with the compiler's libstdc++ preloaded: the probe tries that and
    says how to start Python; a crash the preload does not mend is reported as it is."""
    from stitch.lower import aoti_probe

    def probe(device, env=None):
        return None if env and "LD_PRELOAD" in env and mends else "the process died with signal 11"

    monkeypatch.setattr(aoti_probe, "_probe", probe)
    monkeypatch.setattr(aoti_probe, "compiler_libstdcxx", lambda: "/usr/lib/libstdc++.so.6.0.33")
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    for mends in (True, False):
        how = aoti_probe.aoti_load_failure.__wrapped__("cuda")  # not the session's cached one
        assert "signal 11" in how
        assert ("LD_PRELOAD=/usr/lib/libstdc++.so.6.0.33" in how) == mends, how
