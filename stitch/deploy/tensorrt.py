"""The TensorRT plan: operator coverage and segments, without a GPU.

``torch_tensorrt`` asks the CUDA driver two questions at import; without a GPU they fail.
The plan therefore runs in a subprocess (``python -m stitch.deploy.tensorrt_probe``) that
stubs exactly those two functions, and only when no GPU is present, so nothing else in the
user's process sees the stubs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

import torch

from ..errors import StitchError
from .tensorrt_engine import tensorrt_engine


@dataclass(frozen=True)
class Segment:
    name: str
    engine: str  # "tensorrt" | "pytorch"
    ops: tuple[str, ...]
    why: str = ""  # for pytorch segments: which ops have no converter


@dataclass(frozen=True)
class TensorRTPlan:
    ops_total: int
    ops_supported: int
    unsupported: dict[str, int] = field(default_factory=dict)  # op -> count
    segments: tuple[Segment, ...] = ()
    torch_tensorrt_version: str = ""
    gpu: bool = False
    # the other route: the graph as ONNX -> TensorRT's ONNX parser (cond inside the engine)
    onnx_route: object = None  # stitch.deploy.tensorrt_engine.TensorRTEngine
    onnx_route_error: str = ""  # why that route could not be tried

    @property
    def coverage(self) -> float:
        return self.ops_supported / self.ops_total if self.ops_total else 1.0

    def to_json(self) -> dict:
        return {"ops_total": self.ops_total, "ops_supported": self.ops_supported,
                "coverage": round(self.coverage, 4), "unsupported": dict(self.unsupported),
                "segments": [s.__dict__ | {"ops": list(s.ops)} for s in self.segments],
                "torch_tensorrt_version": self.torch_tensorrt_version, "gpu": self.gpu,
                "onnx_route": self.onnx_route.to_json() if self.onnx_route else None,
                "onnx_route_error": self.onnx_route_error}

    def __str__(self) -> str:
        trt = sum(s.engine == "tensorrt" for s in self.segments)
        lines = [f"TensorRT plan: {self.ops_supported}/{self.ops_total} ops have converters "
                 f"({self.coverage:.0%}); {trt} TensorRT segment(s), "
                 f"{len(self.segments) - trt} PyTorch segment(s)"]
        for s in self.segments:
            lines.append(f"  {s.name:<16} {s.engine:<9} {len(s.ops):>3} ops"
                         + (f"  ({s.why})" if s.why else ""))
        if self.onnx_route is not None:
            lines.append(str(self.onnx_route))
        elif self.onnx_route_error:
            lines.append(f"TensorRT engine via ONNX: not tried ({self.onnx_route_error})")
        return "\n".join(lines)


def tensorrt_plan(program, min_block_size: int = 1, timeout: float = 600,
                  onnx_route: bool = True) -> TensorRTPlan:
    """Plan the TensorRT lowering of a StitchedProgram (works without a GPU): Torch-TensorRT's
    coverage and segments and, with ``onnx_route``, beside it the engine TensorRT's ONNX
    parser builds from the same graph (``tensorrt_engine``; built, not run)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "program.pt2")
        torch.export.save(program.exported_program, path)
        done = subprocess.run(
            [sys.executable, "-m", "stitch.deploy.tensorrt_probe", path, str(min_block_size)],
            capture_output=True, text=True, timeout=timeout)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("PLAN ")), None)
    if done.returncode != 0 or line is None:
        raise StitchError("the TensorRT plan failed: "
                          + (done.stderr.strip().splitlines() or ["no output"])[-1]
                          + "; is torch-tensorrt (or torch-tensorrt-rtx) installed?")
    data = json.loads(line[5:])
    engine, engine_error = None, ""
    if onnx_route:
        try:
            engine = tensorrt_engine(program, timeout=timeout)
        except StitchError as e:  # the onnx extra missing, or the graph refused by ONNX
            engine_error = str(e)
    return TensorRTPlan(
        ops_total=data["ops_total"], ops_supported=data["ops_supported"],
        unsupported=data["unsupported"],
        segments=tuple(Segment(s["name"], s["engine"], tuple(s["ops"]), s["why"])
                       for s in data["segments"]),
        torch_tensorrt_version=data["version"], gpu=data["gpu"], onnx_route=engine,
        onnx_route_error=engine_error)
