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
from .writes import buffer_writes

HOST_SYNC_OPS = ("aten._local_scalar_dense", "aten.item", "aten.nonzero", "aten._assert_scalar")
FACTORY_OPS = ("aten.scalar_tensor", "aten.full", "aten.zeros", "aten.ones", "aten.empty",
               "aten.arange", "aten.tensor")


HOST_CONTROL_FLOW = {"cond": "torch.cond", "while_loop": "torch.while_loop"}


def capture_blockers(ep: torch.export.ExportedProgram, device: str = "cuda") -> list[str]:
    """Why this graph cannot be captured in a CUDA graph on ``device`` (empty: it can).
    Control flow blocks it: torch.cond and torch.while_loop read their predicate on the host
    to pick what runs next, and a read during capture invalidates it (seen on an H100 with
    torch 2.11: "operation failed due to a previous error during capture", eager and
    Inductor alike). torch.where predication has no such read."""
    reasons = []
    for node in ep.graph.nodes:
        value = node.meta.get("val")
        if node.op == "placeholder" and isinstance(value, torch.Tensor):
            if value.device.type != device:
                reasons.append(f"input {node.name} is on {value.device}, not {device}")
            if any(not isinstance(d, int) for d in value.shape):
                reasons.append(f"input {node.name} has a dynamic shape {tuple(value.shape)}")
    for gm in ep.graph_module.modules():
        if not isinstance(gm, torch.fx.GraphModule):
            continue
        for node in gm.graph.nodes:
            if node.op != "call_function":
                continue
            name = getattr(node.target, "__name__", "")
            if isinstance(node.target, torch._ops.HigherOrderOperator) and name in HOST_CONTROL_FLOW:
                reasons.append(f"{HOST_CONTROL_FLOW[name]} reads its predicate on the host to "
                               "choose what runs, which a CUDA graph cannot capture")
            elif str(node.target).startswith(HOST_SYNC_OPS):
                reasons.append(f"{node.target} reads a device value on the host (sync)")
    return list(dict.fromkeys(reasons))


def mutated_buffers(ep: torch.export.ExportedProgram) -> list[str]:
    """Buffers the graph updates: the signature's ``buffers_to_mutate`` (a functional graph)
    or buffer inputs written in place by an op (``copy_``, ``add_``: the graphs
    ``torch.export`` makes by default in torch 2.14 keep those ops and leave the list empty).
    Reading the top-level graph is enough: torch.cond and torch.while_loop refuse bodies that
    write to their operands."""
    sig = ep.graph_signature
    names = set(sig.buffers_to_mutate.values())
    buffer_of = dict(sig.inputs_to_buffers)
    names.update(buffer for _, buffer in buffer_writes(ep.graph, buffer_of))
    return sorted(names)


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
    """Replays ``fn`` from CUDA graphs: one per input signature (shapes, dtypes, non-tensor
    values), captured on first sight (up to ``max_graphs``; they share one memory pool).
    Each call copies the inputs into the graph's static buffers, replays, and returns
    clones of the static outputs."""

    def __init__(self, fn: Callable, example=None, warmup: int = 3, max_graphs: int = 8) -> None:
        if not torch.cuda.is_available():
            raise StitchError("CUDA graphs need a CUDA device; none is available here")
        self.fn = fn
        self.warmup = warmup
        self.max_graphs = max_graphs
        self.pool = torch.cuda.graph_pool_handle()
        self.graphs: dict = {}  # signature -> (graph, static inputs, static outputs)
        if example is not None:
            self.capture(example.args, example.kwargs)

    @staticmethod
    def _signature(flat, spec):
        return (spec, tuple((tuple(t.shape), t.dtype) if isinstance(t, torch.Tensor)
                            else ("value", repr(t)) for t in flat))

    def capture(self, args, kwargs):
        """Capture the graph for these inputs' signature (warm-up runs first)."""
        flat, spec = pytree.tree_flatten((args, kwargs))
        key = self._signature(flat, spec)
        if key in self.graphs:
            return self.graphs[key]
        if len(self.graphs) >= self.max_graphs:
            raise StitchError(f"CUDA graph replay holds {self.max_graphs} graphs already (one "
                              "per input shape); a new shape would capture another. Use "
                              "fewer shapes (pad), or cudagraphs=False")
        static_in = [t.detach().clone().cuda() if isinstance(t, torch.Tensor) else t
                     for t in flat]
        s_args, s_kwargs = pytree.tree_unflatten(static_in, spec)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream), torch.no_grad():
            for _ in range(self.warmup):
                self.fn(*s_args, **s_kwargs)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool), torch.no_grad():
            static_out = self.fn(*s_args, **s_kwargs)
        self.graphs[key] = (graph, static_in, static_out)
        return self.graphs[key]

    def __call__(self, *args, **kwargs):
        flat, _spec = pytree.tree_flatten((args, kwargs))
        graph, static_in, static_out = self.capture(args, kwargs)
        for static, value in zip(static_in, flat, strict=True):
            if isinstance(static, torch.Tensor):
                static.copy_(value)
        graph.replay()
        return pytree.tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t,
                               static_out)
