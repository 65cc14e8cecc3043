"""CUDA graph replay, and the checks that say whether a graph can be captured.

``CudaGraphRunner`` captures a compiled callable once into a CUDA graph with static input
and output buffers; each call copies inputs in, replays, and returns clones of the outputs.
``capture_blockers`` reads the exported FX graph (no GPU needed) and lists what prevents
capture: tensors on the CPU, dynamic shapes, host-synchronising ops. ``move_scalars_to``
is the PyGraph-style pass that creates 0-d/scalar tensors on the device instead of the CPU,
so they need no host-to-device copy during replay.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.utils._pytree as pytree

from ..errors import StitchError

HOST_SYNC_OPS = ("aten._local_scalar_dense", "aten.item", "aten.nonzero", "aten._assert_scalar")
FACTORY_OPS = ("aten.scalar_tensor", "aten.full", "aten.zeros", "aten.ones", "aten.empty",
               "aten.arange", "aten.tensor")


def capture_blockers(ep: torch.export.ExportedProgram, device: str = "cuda") -> list[str]:
    """Why this graph cannot be captured in a CUDA graph on ``device`` (empty: it can)."""
    reasons = []
    for node in ep.graph.nodes:
        value = node.meta.get("val")
        if node.op == "placeholder" and isinstance(value, torch.Tensor):
            if value.device.type != device:
                reasons.append(f"input {node.name} is on {value.device}, not {device}")
            if any(not isinstance(d, int) for d in value.shape):
                reasons.append(f"input {node.name} has a dynamic shape {tuple(value.shape)}")
        if node.op == "call_function" and str(node.target).startswith(HOST_SYNC_OPS):
            reasons.append(f"{node.target} reads a device value on the host (sync)")
    return list(dict.fromkeys(reasons))


def move_scalars_to(gm: torch.fx.GraphModule, device: torch.device | str) -> int:
    """Create scalar/factory tensors on ``device`` instead of the CPU. Returns how many."""
    device = torch.device(device)
    moved = 0
    for node in gm.graph.nodes:
        if node.op != "call_function" or not str(node.target).startswith(FACTORY_OPS):
            continue
        current = node.kwargs.get("device")
        if current is not None and torch.device(current).type == "cpu":
            node.kwargs = {**node.kwargs, "device": device}
            moved += 1
    if moved:
        gm.recompile()
    return moved


class CudaGraphRunner:
    """Replays ``fn`` from a CUDA graph captured on the first call's shapes."""

    def __init__(self, fn: Callable, example, warmup: int = 3) -> None:
        if not torch.cuda.is_available():
            raise StitchError("CUDA graphs need a CUDA device; none is available here")
        self.fn = fn
        flat, self.spec = pytree.tree_flatten((example.args, example.kwargs))
        self.static_in = [t.detach().clone().cuda() if isinstance(t, torch.Tensor) else t
                          for t in flat]
        args, kwargs = pytree.tree_unflatten(self.static_in, self.spec)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream), torch.no_grad():
            for _ in range(warmup):
                fn(*args, **kwargs)
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph), torch.no_grad():
            self.static_out = fn(*args, **kwargs)

    def __call__(self, *args, **kwargs):
        flat, spec = pytree.tree_flatten((args, kwargs))
        if spec != self.spec:
            raise StitchError("CUDA graph replay needs inputs of the captured structure")
        for static, value in zip(self.static_in, flat, strict=True):
            if isinstance(static, torch.Tensor):
                if static.shape != value.shape:
                    raise StitchError(f"CUDA graph captured shape {tuple(static.shape)}, got "
                                      f"{tuple(value.shape)}; re-capture for new shapes")
                static.copy_(value)
        self.graph.replay()
        return pytree.tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t,
                               self.static_out)
