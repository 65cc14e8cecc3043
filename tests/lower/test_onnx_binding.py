"""ONNX Runtime's runs: on CUDA every tensor bound in place (IO binding), on the CPU fed numpy
views. Either way results are torch tensors of the model's dtypes on the inputs' device,
never memory the caller owns (the binding is checked here on the CPU too); on a GPU with
onnxruntime-gpu the graph runs on the CUDA provider, fed and read on the device."""

from __future__ import annotations

import functools

import pytest
import torch

import stitch

pytest.importorskip("onnxruntime", reason="the onnx extra is not installed")
pytest.importorskip("onnxscript", reason="the onnx extra is not installed")


class Mixed(torch.nn.Module):
    """Outputs of several dtypes, one handing back an input as it is, one empty."""

    def forward(self, x, k):
        return x, x > 0, k * 2, x[:0] + 1


@functools.cache
def _runner(bound: frozenset = frozenset({"cpu"})):
    from stitch.lower.onnx_export import to_onnx
    from stitch.lower.onnx_runtime import OnnxRunner

    program = stitch.export(Mixed().eval(), (torch.randn(3, 4), torch.arange(3)))
    runner = OnnxRunner(to_onnx(program))
    runner.bound = set(bound)  # {"cpu"}: the CUDA path's binding, run on the CPU
    return runner


@pytest.mark.parametrize("bound", [frozenset({"cpu"}), frozenset()], ids=["bound", "numpy"])
def test_results_are_tensors_of_the_models_dtypes_and_never_the_callers_memory(bound):
    x, k = torch.randn(3, 4), torch.arange(3)
    got, _ = _runner(bound)(x, k)  # (outputs, extras)
    want = Mixed()(x, k)
    assert [t.dtype for t in got] == [t.dtype for t in want]
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)
    got[0].add_(1)  # the input handed back is a copy: writing it leaves the caller's alone
    assert not torch.equal(got[0], x)


def test_a_dtype_the_binding_cannot_take_is_named_with_the_fix():
    from stitch.lower.onnx_runtime import _numpy_type

    assert _numpy_type("k", torch.int64) is __import__("numpy").int64
    with pytest.raises(TypeError, match=r"bfloat16.*cast it, or deploy on another backend"):
        _numpy_type("x", torch.bfloat16)


def test_bools_handed_through_dlpack_as_bytes_come_back_as_bools(monkeypatch):
    """onnxruntime 1.31.1 on CUDA hands a bool result through DLPack as uint8 (seen on an
    H100): verification refused every graph with a lifted check or a branch flag."""
    import stitch.lower.onnx_runtime as onnx_runtime

    as_tensor = onnx_runtime._as_tensor
    monkeypatch.setattr(onnx_runtime, "_as_tensor", lambda v, where: (
        lambda t: t.to(torch.uint8) if t.dtype == torch.bool else t)(as_tensor(v, where)))
    x, k = torch.randn(3, 4), torch.arange(3)
    got, _ = _runner()(x, k)
    assert got[1].dtype == torch.bool and torch.equal(got[1], x > 0)


def test_a_result_without_dlpack_comes_back_through_host_memory():
    from stitch.lower.onnx_runtime import _as_tensor

    class HostOnly:  # an onnxruntime built without DLPack
        def numpy(self):
            import numpy as np

            return np.arange(4, dtype=np.int64)

    got = _as_tensor(HostOnly(), torch.device("cpu"))
    assert torch.equal(got, torch.arange(4))


def test_the_cuda_provider_computes_float32_products_as_torch_does(monkeypatch):
    """The CUDA provider's TF32 default differed from the model by 1e-3 relative on an H100
    (verification refused every graph): it follows torch's setting instead."""
    import onnxruntime as ort

    from stitch.lower.onnx_runtime import providers

    monkeypatch.setattr(ort, "get_available_providers",
                        lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])
    before = torch.backends.cuda.matmul.allow_tf32
    try:
        for allowed in (False, True):
            torch.backends.cuda.matmul.allow_tf32 = allowed
            assert providers("cuda:1") == [
                ("CUDAExecutionProvider", {"device_id": 1, "use_tf32": int(allowed)}),
                "CPUExecutionProvider"]
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before
    assert providers("cpu") == ["CPUExecutionProvider"]


def _cuda_provider():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        pytest.skip(f"onnxruntime {ort.__version__} has no CUDA provider: install "
                    "onnxruntime-gpu on the GPU machine")


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["branch_on_tensor", "buffer_in_branch", "assert_finite"])
def test_the_cuda_provider_runs_the_graph_on_the_device(name):
    """Both sides of a cond, a stateful graph (buffers carried on the device) and a lifted
    check, on ONNX Runtime's CUDA provider, against the model on CUDA."""
    from tests.zoo import make

    _cuda_provider()
    model, args, kwargs, examples = make(name)
    program = stitch.export(model, args, kwargs, examples=examples)
    compiled = stitch.compile(program, "onnxruntime")  # buffers as at export, as the model's
    model = model.cuda()
    cuda = lambda ts: tuple(t.cuda() for t in ts)  # noqa: E731
    for a, k in [(args, kwargs), *examples, (args, kwargs)]:
        with torch.no_grad():
            got, want = compiled(*cuda(a), **k), model(*cuda(a), **k)
        for g, w in zip(torch.utils._pytree.tree_leaves(got),
                        torch.utils._pytree.tree_leaves(want), strict=True):
            assert g.is_cuda, g.device
            torch.testing.assert_close(g, w)
    runner = compiled._built.run
    assert runner.provider == "CUDAExecutionProvider"
    assert all(v.is_cuda for v in runner.state.values())
