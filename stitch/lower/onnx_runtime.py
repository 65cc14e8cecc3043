"""ONNX Runtime runs an ``OnnxGraph`` like the program's graph module.

``OnnxRunner(graph)(*args, **kwargs)`` returns ``(outputs, extras)``: inputs are flattened
as ``torch.export`` did, tensors fed by name, outputs unflattened with the program's
out_spec. A lifted check that is false raises the check's message as a RuntimeError, which
``run_with_epilogue`` turns back into the model's exception, as on every backend. Updated
buffers (``onnx_state``) are carried from call to call; ``reset()`` goes back to export.

On CUDA, tensors are bound in place (ONNX Runtime's IO binding): inputs are read where they
lie, results come back as torch tensors on the inputs' device through DLPack, with no copy
through host memory. CUDA inputs run on the CUDA provider where this onnxruntime has it
(onnxruntime-gpu); on one without it they are copied to the CPU and the results back. On
the CPU, numpy views of the inputs are fed (``BOUND`` says where binding is used).
"""

from __future__ import annotations

import threading

import numpy as np
import torch
import torch.utils._pytree as pytree

from .built import BackendUnavailable
from .onnx_export import OnnxGraph
from .onnx_state import initial_values

# device types whose runs bind tensors in place (IO binding, DLPack results): CUDA, where it
# saves two copies through host memory per tensor; the CPU is fed numpy views (measured)
BOUND = frozenset({"cuda"})


def providers(device: str = "cpu") -> list:
    """ONNX Runtime execution providers for ``device`` ("cpu", "cuda", "cuda:1"), CPU always
    last as the fallback; a CUDA provider carries its device index."""
    import onnxruntime as ort

    kind, _, index = device.partition(":")
    if kind == "cuda" and "CUDAExecutionProvider" in ort.get_available_providers():
        # TF32 as torch computes: the provider's default (on) differed from the model by
        # 1e-3 relative on an H100, where torch keeps float32 matrix products exact
        tf32 = int(torch.backends.cuda.matmul.allow_tf32)
        return [("CUDAExecutionProvider", {"device_id": int(index or 0), "use_tf32": tf32}),
                "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


def session(model: bytes, threads: int | None = None, device: str = "cpu"):
    try:
        import onnxruntime as ort
    except ImportError as e:
        raise BackendUnavailable(f"onnxruntime is not installed ({e}); pip install "
                                 "'torch-stitch[onnx]'") from None
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or torch.get_num_threads()
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # errors only: warnings about unused initializers are noise
    return ort.InferenceSession(model, options, providers=providers(device))


class OnnxRunner:
    """Module-like: ``runner(*args, **kwargs) -> (outputs, extras)`` through ONNX Runtime."""

    def __init__(self, graph: OnnxGraph, model: bytes | None = None,
                 threads: int | None = None) -> None:
        self.graph = graph
        self._model = model if model is not None else graph.model
        self._threads = threads
        self._session = session(self._model, threads)
        self._sessions = {"cpu": self._session}  # one per device it runs on, made on first use
        self._in_spec = pytree.treespec_loads(graph.in_spec)
        self._out_spec = pytree.treespec_loads(graph.out_spec)
        self._names = [o.name for o in self._session.get_outputs()]  # ORT runs concurrently
        self._bools = {i for i, o in enumerate(self._session.get_outputs())
                       if o.type == "tensor(bool)"}
        self._state_lock = threading.Lock()  # a stateful graph: one call at a time
        self.cuda_fallback: str | None = None  # why CUDA inputs ran on the CPU provider
        self.bound = set(BOUND)  # device types run with tensors bound in place
        self._initial = {}
        if graph.state:
            self._initial = initial_values(model if model is not None else graph.model,
                                           graph.state)
        self.reset()

    def reset(self) -> None:
        """Back to the buffers' values at export (a stateful graph)."""
        self.state = {k: torch.from_numpy(v.copy()) for k, v in self._initial.items()}

    def __call__(self, *args, **kwargs):
        leaves, spec = pytree.tree_flatten((args, kwargs))
        if spec != self._in_spec:
            raise ValueError(f"inputs do not match the exported structure: got {spec}, "
                             f"expected {self._in_spec}")
        devices = {t.device for t in leaves if isinstance(t, torch.Tensor)}
        device = devices.pop() if len(devices) == 1 else torch.device("cpu")
        where = self._session_device(device)  # where ONNX Runtime runs: device or the CPU
        feed = {}
        for index, name in self.graph.feeds:
            leaf = leaves[index]
            if not isinstance(leaf, torch.Tensor):
                raise TypeError(f"input {name} must be a tensor, got {type(leaf).__name__}")
            feed[name] = leaf.detach().to(where).contiguous()
        if not self.graph.state:
            return self._finish(self._run(where, feed), (), device)
        with self._state_lock:
            values = self._run(where, {**feed, **{k: v.to(where) for k, v in
                                                   self.state.items()}})
            n = self.graph.outputs
            return self._finish(values, values[n:n + len(self.graph.state)], device)

    def _run(self, where: torch.device, feed: dict) -> list:
        """One run; results as tensors on ``where``. On a device in ``BOUND`` every tensor is
        bound in place; on the CPU numpy views are fed (faster there: ONNX Runtime's bound
        run cost 0.08 ms more per call on CTRL's graph, 0.74 ms; no copy to save)."""
        opened = self._sessions[str(where)]
        # element types, once: a dtype neither way can take is said plainly
        types = {name: _numpy_type(name, t.dtype) for name, t in feed.items()}
        if where.type not in self.bound:
            values = opened.run(self._names, {k: t.numpy() for k, t in feed.items()})
            return [torch.from_numpy(np.array(v, copy=True)) for v in values]
        binding = opened.io_binding()
        kind, index = where.type, where.index or 0
        for name, t in feed.items():
            binding.bind_input(name, kind, index, types[name], tuple(t.shape), t.data_ptr())
        for name in self._names:
            binding.bind_output(name, kind, index)
        if kind == "cuda":  # ONNX Runtime runs on its own stream: the inputs must be ready
            torch.cuda.current_stream(where).synchronize()
        opened.run_with_iobinding(binding)
        binding.synchronize_outputs()  # the run ends before its stream does (seen on an H100)
        fed = {t.data_ptr() for t in feed.values() if t.numel()}
        values = [_as_tensor(v, where) for v in binding._iobinding.get_outputs()]
        # an onnxruntime before 1.32 hands bools through DLPack as uint8 (seen: 1.31.1, CUDA)
        values = [v.view(torch.bool) if i in self._bools and v.dtype == torch.uint8 else v
                  for i, v in enumerate(values)]
        # never hand out memory the caller or the carried state owns
        return [v.clone() if v.numel() and v.data_ptr() in fed else v for v in values]

    def _session_device(self, device: torch.device) -> torch.device:
        """Where ONNX Runtime runs inputs on ``device``: CUDA inputs on the CUDA provider where
        this onnxruntime has it (onnxruntime-gpu) and it loads, else on the CPU (copied there
        and back; ``cuda_fallback`` says why)."""
        if (device.type != "cuda" or self.cuda_fallback
                or providers("cuda")[0] == "CPUExecutionProvider"):
            return torch.device("cpu")
        where = torch.device("cuda", device.index or 0)
        if str(where) not in self._sessions:
            opened = session(self._model, self._threads, str(where))
            if opened.get_providers()[0] != "CUDAExecutionProvider":  # CUDA libraries missing
                self.cuda_fallback = (f"onnxruntime's CUDA provider did not load on {where} "
                                      f"(providers: {opened.get_providers()}); see "
                                      "onnxruntime's log for the library it missed")
                return torch.device("cpu")
            self._sessions[str(where)] = opened
        return where

    @property
    def provider(self) -> str:
        """The provider the latest CUDA-or-CPU session runs on (reported by gpu_check)."""
        return list(self._sessions.values())[-1].get_providers()[0]

    def _finish(self, values, updates, device: torch.device):
        n, k = self.graph.outputs, len(self.graph.state)
        flat = [v.to(device) for v in values[:n]]  # outputs go back where the inputs were
        for condition, message in zip(values[n + k:], self.graph.checks, strict=True):
            if not bool(condition.all()):  # as in the graph: the state does not advance
                raise RuntimeError(message)  # the program re-raises the model's exception
        for name, value in zip(self.graph.state, updates, strict=True):
            if name in self.state:  # a state input the graph only writes was dropped
                self.state[name] = value
        return pytree.tree_unflatten(flat, self._out_spec)


_NUMPY_TYPES: dict = {}


def _numpy_type(name: str, dtype: torch.dtype):
    """The element type ONNX Runtime's binding takes for a torch dtype."""
    try:
        if dtype not in _NUMPY_TYPES:
            _NUMPY_TYPES[dtype] = torch.empty((), dtype=dtype).numpy().dtype.type
        return _NUMPY_TYPES[dtype]
    except TypeError:
        raise TypeError(f"input {name} is {dtype}, which ONNX Runtime's Python binding "
                        "cannot take (no numpy type); cast it, or deploy on another "
                        "backend") from None


def _as_tensor(value, where: torch.device) -> torch.Tensor:
    """An ONNX Runtime result as a torch tensor on ``where``: through DLPack where this
    onnxruntime has it (no copy), else through host memory."""
    if hasattr(value, "to_dlpack"):
        return torch.utils.dlpack.from_dlpack(value.to_dlpack())
    return torch.from_numpy(value.numpy().copy()).to(where)
