"""A serialized TensorRT engine from the stitched graph, through ONNX (no GPU needed).

``tensorrt_engine(program_or_onnx)`` exports the graph to ONNX (``lower/onnx_export``), parses it
with TensorRT's ONNX parser (TensorRT-RTX when installed: it builds without a GPU; else
standard ``tensorrt``) and builds a serialized engine, in a subprocess (a native crash or a
hang cannot take the caller's process with it). ``torch.cond`` arrives as ONNX ``If`` and
becomes an ``IIfConditional`` (CONDITION layers) inside the engine; ``while_loop`` a loop
(TRIP_LIMIT / RECURRENCE layers) - unlike Torch-TensorRT, which has no converter for cond.

The engine is **built, not run**: running one needs a GPU. What the engine computes is the
ONNX graph, which the ``onnxruntime`` backend checks against the stitched graph on every
example and branch side; the engine itself is unverified here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

from ..errors import StitchError
from ..lower.onnx_export import to_onnx
from ..scratch import scratch_file
from .artifact import ArtifactError
from .onnx_artifact import read_onnx
from .signature import io_signature

PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tensorrt_engine_probe.py")
INSTEAD = ("ONNX Runtime runs the whole graph (stitch.compile(program, 'onnxruntime')); "
           "Torch-TensorRT would run it in PyTorch segments (stitch.tensorrt_plan)")


@dataclass(frozen=True)
class ParserRefusal:
    node: str
    operator: str
    why: str

    def __str__(self) -> str:
        where = f"node {self.node!r} ({self.operator})" if self.node else "the build"
        return f"{where}: {self.why}"


@dataclass(frozen=True)
class TensorRTEngine:
    """The outcome of one engine build: what it holds, or why TensorRT refused."""

    path: str | None  # the serialized engine; None when refused
    bytes: int
    layers: dict[str, int]  # TensorRT layer kind -> count
    conditionals: int  # IIfConditional (one CONDITION layer each)
    loops: int  # ILoop (one TRIP_LIMIT layer each)
    build_seconds: float | None
    refusals: tuple[ParserRefusal, ...] = ()
    profiles: dict = field(default_factory=dict)  # input -> (min, opt, max) shapes
    notes: tuple[str, ...] = ()
    tensorrt: str = ""  # "tensorrt_rtx 1.6.1.120"
    ran: bool = False  # never here: running an engine needs a GPU

    @property
    def built(self) -> bool:
        return self.path is not None and not self.refusals

    def to_json(self) -> dict:
        return {"path": self.path, "bytes": self.bytes, "layers": self.layers,
                "conditionals": self.conditionals, "loops": self.loops,
                "build_seconds": self.build_seconds,
                "refusals": [r.__dict__ for r in self.refusals],
                "profiles": {k: [list(s) for s in v] for k, v in self.profiles.items()},
                "notes": list(self.notes), "tensorrt": self.tensorrt, "ran": self.ran}

    def __str__(self) -> str:
        if not self.built:
            return (f"TensorRT engine via ONNX ({self.tensorrt}): refused\n"
                    + "\n".join(f"  {r}" for r in self.refusals) + f"\n  instead: {INSTEAD}")
        kinds = ", ".join(f"{k} x{v}" for k, v in self.layers.items())
        lines = [f"TensorRT engine via ONNX ({self.tensorrt}): built, not run (needs a GPU); "
                 f"{self.bytes / 1e6:.2f} MB in {self.build_seconds:.1f} s; "
                 f"{self.conditionals} conditional(s), {self.loops} loop(s)",
                 f"  layers: {kinds}"]
        lines += [f"  profile {k}: min {v[0]} opt {v[1]} max {v[2]}"
                  for k, v in self.profiles.items()]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def _source(program_or_onnx):
    """(OnnxGraph or model bytes, signature, example shapes) of a program or an .onnx file."""
    if isinstance(program_or_onnx, str | os.PathLike):
        path = os.fspath(program_or_onnx)
        try:
            manifest, _epilogue, graph = read_onnx(path)
        except ArtifactError as e:
            if "not a stitch artifact" not in str(e):
                raise
            with open(path, "rb") as f:  # a plain ONNX model: shapes as its inputs say
                return f.read(), None, None
        shapes = [s.get("shape") for s in manifest.get("inputs", [])]
        return graph, manifest.get("signature"), shapes
    program = program_or_onnx
    import torch
    import torch.utils._pytree as pytree

    leaves = pytree.tree_leaves((program.example.args, program.example.kwargs))
    shapes = [list(t.shape) if isinstance(t, torch.Tensor) else None for t in leaves]
    return (to_onnx(program), io_signature(program.exported_program,
                                           program.epilogue.number_inputs), shapes)


def optimization_profiles(graph, signature: dict | None, shapes: list | None,
                          override: dict | None = None) -> tuple[dict, list[str]]:
    """One profile: per input with dynamic dims, (min, opt, max) from the exported ranges,
    opt = the example's shape. An unbounded max falls back to the example's size (noted)."""
    profiles, notes = dict(override or {}), []
    if graph is None or signature is None or shapes is None or isinstance(graph, bytes):
        return profiles, notes
    inputs = signature.get("inputs", [])
    for index, name in graph.feeds:
        if name in profiles or index >= len(inputs) or not inputs[index].get("dynamic"):
            continue
        spec, opt = inputs[index], list(shapes[index])
        low, high = list(opt), list(opt)
        for dim, (lo, hi) in spec["dynamic"].items():
            d = int(dim)
            low[d] = max(1, lo if lo is not None else 1)
            if hi is None or hi > 2 ** 20:
                notes.append(f"{name} dim {d} is unbounded: profile max = the example's "
                             f"{opt[d]} (pass profiles= to widen)")
            else:
                high[d] = hi
        profiles[name] = (low, opt, high)
    return profiles, notes


def tensorrt_engine(program_or_onnx, path: str | None = None, *, profiles: dict | None = None,
                    timeout: float = 600) -> TensorRTEngine:
    """Build a serialized TensorRT engine from a StitchedProgram, a stitch ``.onnx`` artifact
    or a plain ONNX file; ``path`` is where the engine goes (otherwise a file in stitch's
    scratch directory, removed when the process exits).
    Parser refusals come back in ``refusals`` (node, operator, why), not as exceptions."""
    graph, signature, shapes = _source(program_or_onnx)
    chosen, notes = optimization_profiles(graph, signature, shapes, profiles)
    model = graph if isinstance(graph, bytes) else graph.model
    if path is None:
        path = scratch_file(".engine", "trt-")
    with tempfile.TemporaryDirectory() as tmp:
        onnx_path = os.path.join(tmp, "model.onnx")
        with open(onnx_path, "wb") as f:
            f.write(model)
        # run as a script, not -m: importing the stitch package would import torch (seconds)
        done = subprocess.run(
            [sys.executable, PROBE, onnx_path, path, json.dumps(chosen)],
            capture_output=True, text=True, timeout=timeout)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("ENGINE ")), None)
    if done.returncode != 0 or line is None:
        raise StitchError("the TensorRT engine build failed: "
                          + (done.stderr.strip().splitlines() or ["no output"])[-1]
                          + "; is tensorrt-rtx (torch-stitch[tensorrt-rtx]) or tensorrt "
                            "installed?")
    data = json.loads(line[len("ENGINE "):])
    refusals = tuple(ParserRefusal(r["node"], r["operator"], r["why"])
                     for r in data["refusals"])
    if refusals or not data["bytes"]:
        if os.path.exists(path):
            os.unlink(path)
        path = None
    int64 = [m for m in data["messages"] if "INT64" in m.upper()]
    if int64:
        notes.append(f"TensorRT warned about int64: {int64[0][:200]}")
    return TensorRTEngine(
        path=path, bytes=data["bytes"], layers=data["layers"],
        conditionals=data["conditionals"], loops=data["loops"],
        build_seconds=data["build_seconds"], refusals=refusals,
        profiles={k: tuple(tuple(s) for s in v) for k, v in chosen.items()},
        notes=tuple(notes), tensorrt=f"{data['flavour']} {data['version']}")
