"""What a server exposes for an artifact: named tensors, the batch dimension, batching.

Built from the manifest alone (no compiled code is loaded): the I/O signature recorded at
save time says each tensor's name, dtype, shape and dynamic dims. Requests are checked here
against it, so a bad request gets an error naming the input, what came and what was expected.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from ..errors import RequestError, ServeError

NUMPY_DTYPES = {
    "torch.float32": np.float32, "torch.float64": np.float64, "torch.float16": np.float16,
    "torch.int64": np.int64, "torch.int32": np.int32, "torch.int16": np.int16,
    "torch.int8": np.int8, "torch.uint8": np.uint8, "torch.bool": np.bool_,
}
# the data_type names of a Triton config.pbtxt
TRITON_DTYPES = {
    "torch.float32": "TYPE_FP32", "torch.float64": "TYPE_FP64", "torch.float16": "TYPE_FP16",
    "torch.int64": "TYPE_INT64", "torch.int32": "TYPE_INT32", "torch.int16": "TYPE_INT16",
    "torch.int8": "TYPE_INT8", "torch.uint8": "TYPE_UINT8", "torch.bool": "TYPE_BOOL",
}
DEFAULT_MAX_BATCH = 8


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: str  # torch dtype, e.g. "torch.float32"
    shape: tuple[int, ...]  # -1 where dynamic, batch dim included
    ranges: dict = field(default_factory=dict)  # dim (str) -> [min, max] (None: unbounded)
    path: str = ""

    @property
    def numpy_dtype(self):
        return NUMPY_DTYPES[self.dtype]

    def describe(self) -> str:
        return f"{self.name} ({self.dtype.removeprefix('torch.')}, shape {list(self.shape)})"


@dataclass(frozen=True)
class BatchingDecision:
    """How requests meet the batch dimension; recorded, printed at start, never guessed."""

    batch_dim_dynamic: bool
    max_batch_size: int  # 0: Triton sees full shapes, no batch dimension
    dynamic_batching: bool  # Triton may merge requests into one call
    reason: str

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ServeSpec:
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    constants: dict  # path -> value of non-tensor inputs the graph was specialised to
    batching: BatchingDecision

    @staticmethod
    def from_manifest(manifest: dict, *, max_batch_size: int | None = None,
                      epilogue_calls: int = 0) -> ServeSpec:
        sig = manifest.get("signature")
        if not sig:
            raise ServeError("the artifact has no I/O signature in its manifest (written by "
                             "an older stitch): re-export it with `stitch export -o`")
        inputs, constants = [], {}
        for s in sig["inputs"]:
            if "constant" in s:
                constants[s["path"]] = s["constant"]
            else:
                inputs.append(_tensor_spec(s))
        outputs = [_tensor_spec(s) for s in sig["outputs"] if "constant" not in s]
        for spec in inputs:
            if not _flat_path(spec.path):
                raise ServeError(f"input {spec.path} is nested inside a container; a server "
                                 "needs flat tensor arguments: give forward() plain tensors")
        decisions = (manifest.get("report") or {}).get("decisions", [])
        batching = _batching(inputs, sig, max_batch_size, epilogue_calls, decisions)
        return ServeSpec(tuple(inputs), tuple(outputs), constants, batching)

    # -- Triton's view: the batch dim is implicit when max_batch_size > 0 ---------------
    def triton_shape(self, spec: TensorSpec) -> tuple[int, ...]:
        return spec.shape[1:] if self.batching.max_batch_size > 0 else spec.shape

    # -- requests ------------------------------------------------------------------------
    def bind(self, arrays: dict) -> tuple[tuple, dict]:
        """Check a request's arrays and turn them into the model's (args, kwargs)."""
        expected = {s.name: s for s in self.inputs}
        unknown = sorted(set(arrays) - set(expected))
        if unknown:
            raise RequestError(f"unknown input {unknown[0]!r}; this model takes "
                               f"{', '.join(s.describe() for s in self.inputs)}")
        missing = [n for n in expected if n not in arrays]
        if missing:
            raise RequestError(f"missing input {missing[0]!r}: expected "
                               f"{expected[missing[0]].describe()}")
        args: dict[int, object] = {}
        kwargs: dict[str, object] = {}
        for spec in self.inputs:
            tensor = self._check(spec, arrays[spec.name])
            _place(spec.path, tensor, args, kwargs)
        for path, value in self.constants.items():
            _place(path, value, args, kwargs)
        if sorted(args) != list(range(len(args))):
            raise ServeError(f"the signature's positional inputs are {sorted(args)}; expected "
                             f"0..{len(args) - 1}: the manifest is inconsistent, re-export")
        return tuple(args[i] for i in sorted(args)), kwargs

    def _check(self, spec: TensorSpec, array) -> torch.Tensor:
        array = np.asarray(array)
        if array.dtype != np.dtype(spec.numpy_dtype):
            raise RequestError(f"input {spec.name!r} has dtype {array.dtype}; expected "
                               f"{np.dtype(spec.numpy_dtype)}")
        if array.ndim != len(spec.shape):
            raise RequestError(f"input {spec.name!r} has shape {list(array.shape)}; expected "
                               f"{len(spec.shape)} dims, shape {list(spec.shape)}")
        for dim, (got, want) in enumerate(zip(array.shape, spec.shape, strict=True)):
            if want >= 0 and got != want:
                raise RequestError(f"input {spec.name!r} has shape {list(array.shape)}; "
                                   f"expected {list(spec.shape)} (dim {dim} must be {want})")
            low, high = spec.ranges.get(str(dim), [None, None])
            if want < 0 and ((low is not None and got < low) or (high is not None and
                                                                 got > high)):
                what = "batch size" if dim == 0 and self.batching.batch_dim_dynamic else \
                    f"dim {dim}"
                raise RequestError(f"input {spec.name!r}: {what} {got} is outside the range "
                                   f"the artifact was exported for, [{low}, {high}]")
        return torch.from_numpy(np.ascontiguousarray(array))

    def unbind(self, out) -> dict:
        """The model's output as named numpy arrays, in the signature's order."""
        import torch.utils._pytree as pytree

        leaves = [leaf for leaf in pytree.tree_leaves(out) if isinstance(leaf, torch.Tensor)]
        if len(leaves) != len(self.outputs):
            raise ServeError(f"the model returned {len(leaves)} tensors; the artifact's "
                             f"signature lists {len(self.outputs)}")
        return {spec.name: leaf.detach().cpu().numpy()
                for spec, leaf in zip(self.outputs, leaves, strict=True)}


def _tensor_spec(s: dict) -> TensorSpec:
    if s["dtype"] not in NUMPY_DTYPES:
        raise ServeError(f"{s['name']}: dtype {s['dtype']} has no numpy/Triton equivalent "
                         f"here; servable dtypes: {', '.join(sorted(NUMPY_DTYPES))}")
    return TensorSpec(s["name"], s["dtype"], tuple(s["shape"]), dict(s.get("dynamic", {})),
                      s.get("path", ""))


def _flat_path(path: str) -> bool:
    return path.count("[") == 2


def _place(path: str, value, args: dict, kwargs: dict) -> None:
    outer, inner = path[1:].split("][", 1)
    key = inner[:-1]
    if outer == "0":
        args[int(key)] = value
    else:
        kwargs[key.strip("'\"")] = value


def _batching(inputs, sig, requested: int | None, epilogue_calls: int, decisions: list
              ) -> BatchingDecision:
    tensors = [s for s in sig["inputs"] + sig["outputs"] if "constant" not in s]
    symbols = {(s.get("symbols") or [None])[0] if s["shape"] else None for s in tensors}
    dynamic = bool(tensors) and len(symbols) == 1 and None not in symbols
    if not dynamic:
        if requested:
            first = inputs[0].describe() if inputs else "the model"
            raise ServeError(f"--max-batch-size {requested} needs a dynamic batch dimension, "
                             f"but the artifact's dim 0 is static or not shared by every "
                             f"input and output ({first}). Re-export with dynamic_shapes, e.g. "
                             "{'x': {0: torch.export.Dim('batch', max=64)}}")
        return BatchingDecision(False, 0, False, "the batch dimension is static in the "
                                "exported graph: each request carries the full shape")
    high = inputs[0].ranges.get("0", [None, None])[1] if inputs else None
    size = requested or (min(DEFAULT_MAX_BATCH, high) if high else DEFAULT_MAX_BATCH)
    if high is not None and size > high:
        raise ServeError(f"--max-batch-size {size} exceeds the batch range the artifact was "
                         f"exported for (at most {high})")
    if epilogue_calls:
        return BatchingDecision(True, size, False, f"requests are not merged: the model makes "
                                f"{epilogue_calls} side-effecting call(s) per call (the "
                                "epilogue), and merging would make them once for several "
                                "requests, with values over the merged batch")
    control = [d for d in decisions if d.get("action") != "epilogue"]
    if control:
        where = ", ".join(f"{d['action']} at {d['location']}" for d in control[:3])
        return BatchingDecision(True, size, False, f"requests are not merged: the stitched "
                                f"graph has data-dependent control ({where}); a predicate "
                                "over the batch would see other requests' rows")
    return BatchingDecision(True, size, True, "dynamic batch dimension, no per-call side "
                            "effects, no data-dependent control; row independence is probed "
                            "when the server starts")


def disable_merging(decision: BatchingDecision, why: str) -> BatchingDecision:
    return BatchingDecision(decision.batch_dim_dynamic, decision.max_batch_size, False, why)
