"""One builder per backend; each returns a ``Built`` (callable graph + how long it took)."""

from __future__ import annotations

import copy
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.utils._pytree as pytree

from ..errors import StitchError


class BackendUnavailable(StitchError):
    """A backend cannot be built on this machine (no GPU, package missing ...)."""


@dataclass
class Built:
    backend: str
    run: Callable  # module-like: run(*args, **kwargs) -> (outputs, extras)
    compile_seconds: float
    package_path: str | None = None  # the AOTInductor package, when built
    note: str = ""
    reset: Callable[[], None] | None = None  # back to the exported state (buffers)
    predicated: bool = False  # its conds select with torch.where (stitch.lower.predicate)


def _module_reset(built: Built, module: torch.nn.Module) -> Built:
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
    return _module_reset(Built("eager", module, 0.0), module)


def _inductor(program, example, module=None) -> Built:
    module = module if module is not None else copy.deepcopy(program.exported_program.module())
    compiled = torch.compile(module, fullgraph=True, dynamic=False)
    built = _module_reset(Built("inductor", compiled, 0.0), module)
    start = time.perf_counter()
    with torch.no_grad():
        compiled(*example.args, **example.kwargs)  # compile now, not on the first request
    built.compile_seconds = time.perf_counter() - start
    built.reset()
    return built


def _aoti(program, example, package_path: str | None = None) -> Built:
    devices = {t.device.type for t in pytree.tree_leaves((example.args, example.kwargs))
               if isinstance(t, torch.Tensor)}
    for device in sorted(devices - {"cpu"}):
        from .aoti_probe import aoti_load_failure

        failure = aoti_load_failure(device)
        if failure:
            raise BackendUnavailable(failure)
    if package_path is None:
        handle, package_path = tempfile.mkstemp(suffix=".pt2", prefix="stitch-aoti-")
        os.close(handle)
        os.unlink(package_path)
    start = time.perf_counter()
    torch._inductor.aoti_compile_and_package(program.exported_program, package_path=package_path)
    built = Built("aoti", torch._inductor.aoti_load_package(package_path),
                  time.perf_counter() - start, package_path)

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
                                 "'stitch[tensorrt]'") from None
    start = time.perf_counter()
    inputs = [a.cuda() if isinstance(a, torch.Tensor) else a for a in example.args]
    trt = torch_tensorrt.dynamo.compile(program.exported_program, inputs=inputs,
                                        pass_through_build_failures=True)
    return Built("tensorrt", trt, time.perf_counter() - start,
                 note="cond runs in PyTorch between TensorRT segments (no converter)")


BACKENDS: dict[str, Callable] = {
    "eager": _eager,
    "inductor": _inductor,
    "aoti": _aoti,
    "tensorrt": _tensorrt,
}


def build(backend: str, program, example, **kwargs) -> Built:
    if backend not in BACKENDS:
        raise StitchError(f"unknown backend {backend!r}; expected one of "
                          f"{', '.join(BACKENDS)} or 'auto'")
    return BACKENDS[backend](program, example, **kwargs)
