"""One builder per backend; each returns a ``Built`` (callable graph + how long it took)."""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Callable

import torch
import torch.utils._pytree as pytree

from capture.tracing_fixes import lowering_fixes

from ..errors import StitchError
from ..scratch import scratch_file
from .built import BackendUnavailable, Built
from .onnx_export import OnnxRefused, to_onnx
from .onnx_forced import check_every_side
from .onnx_runtime import OnnxRunner
from .regional import holds_control_flow, regional


def _branch_local(compiled: Callable) -> Callable:
    """``compiled``, each call (and so each recompile) under stitch's lowering fixes
    (capture/tracing_fixes.py: cond-arm assertions kept to their arm, fake kernels' sizes
    counted from 0, n-ary symbolic min/max lowered)."""
    def run(*args, **kwargs):
        with lowering_fixes():
            return compiled(*args, **kwargs)
    return run


def with_module_reset(built: Built, module: torch.nn.Module) -> Built:
    saved = {k: v.detach().clone() for k, v in module.named_buffers()}

    def reset() -> None:
        with torch.no_grad():
            for k, v in module.named_buffers():
                v.copy_(saved[k])
    built.reset = reset
    return built


def _eager(program, example, module=None) -> Built:
    """``module``: a graph module to run instead of the program's (a predicated one)."""
    module = module if module is not None else copy.deepcopy(program.exported_program.module())
    return with_module_reset(Built("eager", module, 0.0), module)


def _inductor(program, example, module=None) -> Built:
    module = module if module is not None else copy.deepcopy(program.exported_program.module())
    compiled = _branch_local(torch.compile(module, fullgraph=True, dynamic=False))
    built = with_module_reset(Built("inductor", compiled, 0.0), module)
    start = time.perf_counter()
    with torch.no_grad():
        compiled(*example.args, **example.kwargs)  # compile now, not on the first request
    built.compile_seconds = time.perf_counter() - start
    built.reset()
    return built


# Inductor settings AOTInductor gets when the graph holds a higher-order op, and why: each a
# torch bug seen on the pin, checked by tests/lower/test_zoo_backends.py.
AOTI_WORKAROUNDS = {
    torch.ops.higher_order.while_loop: (
        {"allow_buffer_reuse": False},
        "AOTInductor reuses a while_loop's input buffer for a later result although the "
        "loop's output is that same buffer when the loop runs no iteration (torch 2.14.1: "
        "wrong values after a zero-trip loop); buffer reuse is off for this graph"),
}


def aoti_workarounds(exported_program) -> tuple[dict, list[str]]:
    """The Inductor settings and the reasons that apply to this graph (nested graphs too)."""
    found = {node.target for module in exported_program.graph_module.modules()
             if isinstance(module, torch.fx.GraphModule)
             for node in module.graph.nodes if node.op == "call_function"}
    configs, reasons = {}, []
    for op, (config, why) in AOTI_WORKAROUNDS.items():
        if op in found:
            configs.update(config)
            reasons.append(why)
    return configs, reasons


def _aoti(program, example, package_path: str | None = None) -> Built:
    devices = {t.device.type for t in pytree.tree_leaves((example.args, example.kwargs))
               if isinstance(t, torch.Tensor)}
    for device in sorted(devices - {"cpu"}):
        from .aoti_probe import aoti_load_failure

        failure = aoti_load_failure(device)
        if failure:
            raise BackendUnavailable(failure)
    if package_path is None:
        package_path = scratch_file(".pt2", "aoti-")
        os.unlink(package_path)
    configs, reasons = aoti_workarounds(program.exported_program)
    start = time.perf_counter()
    with lowering_fixes():  # its lowering traces the cond arms again
        torch._inductor.aoti_compile_and_package(program.exported_program,
                                                 package_path=package_path,
                                                 inductor_configs=configs)
    built = Built("aoti", torch._inductor.aoti_load_package(package_path),
                  time.perf_counter() - start, package_path, note="; ".join(reasons))

    def reset() -> None:  # a fresh load starts from the packaged state
        built.run = torch._inductor.aoti_load_package(package_path)
    built.reset = reset
    return built


def _tensorrt(program, example) -> Built:
    if not torch.cuda.is_available():
        raise BackendUnavailable("tensorrt needs a CUDA GPU; torch.cuda.is_available() is "
                                 "False here. stitch.tensorrt_plan(program) shows the plan.")
    try:
        import torch_tensorrt  # imported here only: it probes the GPU at import
    except ImportError as e:
        raise BackendUnavailable(f"torch_tensorrt is not installed ({e}); pip install "
                                 "'torch-stitch[tensorrt]'") from None
    start = time.perf_counter()
    inputs = [a.cuda() if isinstance(a, torch.Tensor) else a for a in example.args]
    trt = torch_tensorrt.dynamo.compile(program.exported_program, inputs=inputs,
                                        pass_through_build_failures=True)
    return Built("tensorrt", trt, time.perf_counter() - start,
                 note="cond runs in PyTorch between TensorRT segments (no converter)")


def _onnxruntime(program, example, examples=None) -> Built:
    """The graph as ONNX, run by ONNX Runtime; every cond side checked forced against the
    stitched graph on every example (``onnx_forced``), as the examples reach only some."""
    start = time.perf_counter()
    graph = to_onnx(program)
    runner = OnnxRunner(graph)
    expected = graph.outputs + len(graph.state) + len(graph.checks)
    if len(runner._names) != expected:
        raise OnnxRefused(f"the ONNX graph has {len(runner._names)} outputs, expected "
                          f"{expected} (the program's {graph.outputs}, {len(graph.state)} "
                          f"buffer updates, {len(graph.checks)} lifted checks); a non-tensor "
                          "output cannot come back from ONNX")
    compile_seconds = time.perf_counter() - start

    def reference(module, ex):
        with torch.no_grad():
            return module(*ex.args, **ex.kwargs)

    def onnx_runner(model: bytes):
        forced = OnnxRunner(graph, model)
        return lambda ex: forced(*ex.args, **ex.kwargs)

    sides = check_every_side(program, graph, examples or program.examples or [example],
                             reference, onnx_runner)
    note = (f"{len(sides)} branch side(s) checked forced against the graph"
            if sides else "no branches")
    return Built("onnxruntime", runner, compile_seconds, note=note, onnx_graph=graph,
                 sides=tuple(sides), reset=runner.reset if graph.state else None)


def _regional(program, example, examples=None) -> Built:
    """Each piece (straight-line region, cond arm, loop test or body) compiled where that
    pays on the examples (``regional_choice``); the decisions are on ``Built.pieces``."""
    if not holds_control_flow(program.exported_program.graph_module):
        raise BackendUnavailable("regional lowering cuts the graph at its control flow; this "
                                 "graph holds none (inductor compiles it whole)")
    module = copy.deepcopy(program.exported_program.module())
    start = time.perf_counter()
    split, decisions = regional(module, examples or program.examples or [example])
    compiled = [d for d in decisions if d.compiled]
    # a compiled piece recompiles on a size it has not seen: under stitch's tracing fixes
    run = _branch_local(split) if compiled else split
    note = (f"{len(compiled)} of {len(decisions)} piece(s) compiled by Inductor "
            f"({', '.join(d.name for d in compiled) or 'none was faster'}); the rest and "
            "the control-flow operators run as exported")
    return with_module_reset(Built("regional", run, time.perf_counter() - start, note=note,
                                   pieces=decisions), module)


BACKENDS: dict[str, Callable] = {
    "eager": _eager,
    "inductor": _inductor,
    "regional": _regional,
    "aoti": _aoti,
    "tensorrt": _tensorrt,
    "onnxruntime": _onnxruntime,
}


def build(backend: str, program, example, **kwargs) -> Built:
    if backend not in BACKENDS:
        raise StitchError(f"unknown backend {backend!r}; expected one of "
                          f"{', '.join(BACKENDS)} or 'auto'")
    with lowering_fixes():  # Inductor and the exporters trace the conds' arms again
        return BACKENDS[backend](program, example, **kwargs)
