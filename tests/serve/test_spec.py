"""Serving decisions from the manifest alone: names, batching, request checks, variant,
the libpython diagnosis and the Triton config. No server, no compiled code."""

from __future__ import annotations

import numpy as np
import pytest

from stitch.errors import RequestError, ServeError
from stitch.serve import ServeSpec, choose_variant
from stitch.serve.environment import explain_failure
from stitch.serve.triton_repo import config_pbtxt


def manifest(batch="dynamic", decisions=(), device="cpu", chosen="aoti"):
    dyn = batch == "dynamic"
    x = {"name": "INPUT__0", "path": "[0][0]", "dtype": "torch.float32",
         "shape": [-1 if dyn else 4, 32], "symbols": ["s0" if dyn else None, None],
         "dynamic": {"0": [1, 16]} if dyn else {}}
    mask = {"name": "mask", "path": "[1]['mask']", "dtype": "torch.bool",
            "shape": [-1 if dyn else 4], "symbols": ["s0" if dyn else None],
            "dynamic": {"0": [1, 16]} if dyn else {}}
    out = dict(x, name="OUTPUT__0", path="")
    return {"signature": {"inputs": [x, mask, {"name": "INPUT__1", "path": "[0][1]",
                                               "constant": 3}], "outputs": [out]},
            "inputs": [{"name": "[0][0]", "dtype": "torch.float32", "device": device}],
            "deployment": {"chosen": chosen}, "report": {"decisions": list(decisions)}}


COND = {"action": "torch.cond", "location": "m.py:12"}


def test_batching_is_decided_from_the_graph_and_said_why():
    static = ServeSpec.from_manifest(manifest("static")).batching
    assert (static.max_batch_size, static.dynamic_batching) == (0, False)
    assert "static" in static.reason
    dyn = ServeSpec.from_manifest(manifest()).batching
    assert (dyn.max_batch_size, dyn.dynamic_batching) == (8, True)
    side = ServeSpec.from_manifest(manifest(), epilogue_calls=2).batching
    assert side.max_batch_size == 8 and not side.dynamic_batching
    assert "2 side-effecting" in side.reason
    control = ServeSpec.from_manifest(manifest(decisions=[COND]), max_batch_size=16).batching
    assert control.max_batch_size == 16 and not control.dynamic_batching
    assert "torch.cond at m.py:12" in control.reason


def test_batch_sizes_the_graph_cannot_take_are_refused():
    with pytest.raises(ServeError, match="exceeds the batch range.*at most 16"):
        ServeSpec.from_manifest(manifest(), max_batch_size=17)
    with pytest.raises(ServeError, match="needs a dynamic batch dimension.*Dim"):
        ServeSpec.from_manifest(manifest("static"), max_batch_size=4)
    with pytest.raises(ServeError, match="no I/O signature.*re-export"):
        ServeSpec.from_manifest({"inputs": []})


def test_requests_bind_to_args_kwargs_and_constants():
    spec = ServeSpec.from_manifest(manifest())
    args, kwargs = spec.bind({"INPUT__0": np.ones((3, 32), np.float32),
                              "mask": np.ones(3, np.bool_)})
    assert len(args) == 2 and args[0].shape == (3, 32) and args[1] == 3
    assert kwargs["mask"].dtype.is_floating_point is False and kwargs["mask"].shape == (3,)


@pytest.mark.parametrize("arrays, message", [
    ({"INPUT__0": np.ones((3, 32), np.float32), "mask": np.ones(3, np.bool_), "y": 1},
     "unknown input 'y'; this model takes INPUT__0 .float32, shape .-1, 32..."),
    ({"INPUT__0": np.ones((3, 32), np.float32)}, "missing input 'mask'"),
    ({"INPUT__0": np.ones((3, 32), np.float64), "mask": np.ones(3, np.bool_)},
     "'INPUT__0' has dtype float64; expected float32"),
    ({"INPUT__0": np.ones((3, 31), np.float32), "mask": np.ones(3, np.bool_)},
     r"dim 1 must be 32"),
    ({"INPUT__0": np.ones(32, np.float32), "mask": np.ones(3, np.bool_)}, "expected 2 dims"),
    ({"INPUT__0": np.ones((17, 32), np.float32), "mask": np.ones(17, np.bool_)},
     r"batch size 17 is outside the range the artifact was exported for, \[1, 16\]"),
])
def test_bad_requests_say_what_came_and_what_was_expected(arrays, message):
    with pytest.raises(RequestError, match=message):
        ServeSpec.from_manifest(manifest()).bind(arrays)


def test_variant_says_what_is_served_and_why():
    cpu = choose_variant(manifest(), cuda_available=False)
    assert cpu.name == "aoti-cpu" and "no GPU here" in cpu.reason
    built_for_cpu = choose_variant(manifest(), cuda_available=True)
    assert built_for_cpu.name == "aoti-cpu" and "built for CPU" in built_for_cpu.reason
    trt = choose_variant(manifest(device="cuda:0", chosen="tensorrt"), cuda_available=True)
    assert trt.name == "aoti-cuda" and "TensorRT engines are not saved" in trt.reason
    with pytest.raises(ServeError, match="built for CUDA.*is_available"):
        choose_variant(manifest(device="cuda:0"), cuda_available=False)


def test_the_libpython_mismatch_becomes_a_clear_error():
    log = "AttributeError: '_thread.RLock' object has no attribute '_recursion_count'"
    error = explain_failure(log)
    assert error is not None and "LD_LIBRARY_PATH" in str(error)
    assert explain_failure("model loaded") is None


def test_triton_config_matches_the_spec():
    spec = ServeSpec.from_manifest(manifest(), epilogue_calls=1)
    text = config_pbtxt("m", spec)
    assert 'name: "m"' in text and "max_batch_size: 8" in text
    assert '{ name: "INPUT__0" data_type: TYPE_FP32 dims: [ 32 ] }' in text
    # a per-row scalar: Triton needs dims [1], reshaped to [] for the model
    assert '{ name: "mask" data_type: TYPE_BOOL dims: [ 1 ] reshape: { shape: [ ] } }' in text
    assert "dynamic_batching" not in text
    static = config_pbtxt("m", ServeSpec.from_manifest(manifest("static")))
    assert "max_batch_size: 0" in static and "dims: [ 4, 32 ]" in static
