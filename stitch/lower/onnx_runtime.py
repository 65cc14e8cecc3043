"""ONNX Runtime runs an ``OnnxGraph`` like the program's graph module.

``OnnxRunner(graph)(*args, **kwargs)`` returns ``(outputs, extras)``: inputs are flattened
as ``torch.export`` did, tensors fed by name, outputs unflattened with the program's
out_spec. A lifted check that is false raises the check's message as a RuntimeError, which
``run_with_epilogue`` turns back into the model's exception, as on every backend. Updated
buffers (``onnx_state``) are carried from call to call; ``reset()`` goes back to export.
"""

from __future__ import annotations

import threading

import numpy as np
import torch
import torch.utils._pytree as pytree

from .backends import BackendUnavailable
from .onnx_export import OnnxGraph


def providers(device: str = "cpu") -> list[str]:
    """ONNX Runtime execution providers for ``device`` (CPU always last, as the fallback)."""
    import onnxruntime as ort

    have = set(ort.get_available_providers())
    wanted = ["CUDAExecutionProvider"] if device == "cuda" else []
    return [p for p in wanted if p in have] + ["CPUExecutionProvider"]


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
        self._sessions = {"cpu": self._session}  # one per input device, made on first use
        self._in_spec = pytree.treespec_loads(graph.in_spec)
        self._out_spec = pytree.treespec_loads(graph.out_spec)
        self._names = [o.name for o in self._session.get_outputs()]  # ORT runs concurrently
        self._state_lock = threading.Lock()  # a stateful graph: one call at a time
        self._initial = {}
        if graph.state:
            from .onnx_state import initial_values

            self._initial = initial_values(model if model is not None else graph.model,
                                           graph.state)
        self.reset()

    def reset(self) -> None:
        """Back to the buffers' values at export (a stateful graph)."""
        self.state = {k: v.copy() for k, v in self._initial.items()}

    def __call__(self, *args, **kwargs):
        leaves, spec = pytree.tree_flatten((args, kwargs))
        if spec != self._in_spec:
            raise ValueError(f"inputs do not match the exported structure: got {spec}, "
                             f"expected {self._in_spec}")
        feed = {}
        devices = {t.device for t in leaves if isinstance(t, torch.Tensor)}
        device = devices.pop() if len(devices) == 1 else torch.device("cpu")
        for index, name in self.graph.feeds:
            leaf = leaves[index]
            if not isinstance(leaf, torch.Tensor):
                raise TypeError(f"input {name} must be a tensor, got {type(leaf).__name__}")
            feed[name] = leaf.detach().cpu().contiguous().numpy()
        run = self._session_for(device).run
        if not self.graph.state:
            return self._finish(run(self._names, feed), (), device)
        with self._state_lock:
            values = run(self._names, {**feed, **self.state})
            n = self.graph.outputs
            return self._finish(values, values[n:n + len(self.graph.state)], device)

    def _session_for(self, device: torch.device):
        """CUDA inputs run on ONNX Runtime's CUDA provider where this onnxruntime has it
        (onnxruntime-gpu), else on the CPU one. Feeds and results still pass through host
        memory (numpy): no IO binding yet."""
        kind = "cuda" if device.type == "cuda" and "CUDAExecutionProvider" in providers(
            "cuda") else "cpu"
        if kind not in self._sessions:
            self._sessions[kind] = session(self._model, self._threads, kind)
        return self._sessions[kind]

    @property
    def provider(self) -> str:
        """The provider the latest CUDA-or-CPU session runs on (reported by gpu_check)."""
        return list(self._sessions.values())[-1].get_providers()[0]

    def _finish(self, values, updates, device: torch.device):
        n, k = self.graph.outputs, len(self.graph.state)
        # results come back through host memory: outputs go back where the inputs were
        flat = [torch.from_numpy(np.array(v, copy=True)).to(device) for v in values[:n]]
        for condition, message in zip(values[n + k:], self.graph.checks, strict=True):
            if not bool(np.all(condition)):  # as in the graph: the state does not advance
                raise RuntimeError(message)  # the program re-raises the model's exception
        for name, value in zip(self.graph.state, updates, strict=True):
            if name in self.state:  # a state input the graph only writes was dropped
                self.state[name] = np.array(value, copy=True)
        return pytree.tree_unflatten(flat, self._out_spec)
