"""A Triton model repository for an artifact, servable by a stock Triton deployment.

    DIR/<model>/config.pbtxt        inputs, outputs, batch size, batching, Python backend
    DIR/<model>/1/model.py          Python-backend model: loads the artifact, runs the epilogue
    DIR/<model>/1/model.pt2         the artifact (checked again when the model loads), or
    DIR/<model>/1/model.onnx        an ONNX artifact (run by ONNX Runtime in the Python backend)

For an ONNX artifact, with ``stock_onnx`` (``stitch export --triton-repo``), it also writes
the stock variant for GPU servers, where Triton's own
ONNX Runtime backend runs the graph (TensorRT as its accelerator) and a Python step replays
the epilogue:

    DIR/<model>_graph/              platform onnxruntime_onnx, TensorRT accelerator, KIND_GPU
    DIR/<model>_epilogue/           Python backend: checks, epilogue, the user's outputs
    DIR/<model>_pipeline/           ensemble: <model>_graph -> <model>_epilogue

Triton's Python backend needs ``stitch`` and ``torch`` importable by its stub (install them
into the server's Python, or name a venv's site-packages in ``STITCH_SITE_DIRS``), and the
stub must link the same libpython as that environment (see ``stitch.serve.environment``).
"""

from __future__ import annotations

import os
import shutil

from ..deploy.artifact import read_manifest
from ..deploy.onnx_artifact import read_onnx
from ..errors import ServeError
from .spec import TRITON_DTYPES, ServeSpec, disable_merging
from .triton_onnx import write_stock_onnx

MODEL_PY = '''"""Serves a stitch artifact (model.pt2 beside this file); written by stitch export
--triton-repo. Needs stitch and torch importable by Triton's Python stub: install them into
the server's Python, or list site-packages folders (a venv's) in STITCH_SITE_DIRS (the stub
ignores PYTHONPATH; they go first, and site.addsitedir reads their .pth files)."""

import os
import site
import sys

_before = list(sys.path)
for _d in filter(None, os.environ.get("STITCH_SITE_DIRS", "").split(os.pathsep)):
    site.addsitedir(_d)
sys.path[:] = [p for p in sys.path if p not in _before] + _before  # these dirs win

import triton_python_backend_utils as pb_utils  # noqa: E402

from stitch.serve.python_backend import StitchedTritonModel  # noqa: E402


class TritonPythonModel(StitchedTritonModel):
    utils = pb_utils
'''


def config_pbtxt(name: str, spec: ServeSpec) -> str:
    def tensors(specs) -> str:
        def dims(s) -> str:
            shape = spec.triton_shape(s)
            if not shape:  # a per-row scalar: Triton wants dims [1], the model gets []
                return "dims: [ 1 ] reshape: { shape: [ ] }"
            return f"dims: [ {', '.join(str(d) for d in shape)} ]"

        return ",\n".join(f'  {{ name: "{s.name}" data_type: {TRITON_DTYPES[s.dtype]} '
                           f"{dims(s)} }}" for s in specs)

    batching = spec.batching
    lines = [f'name: "{name}"', 'backend: "python"',
             f"max_batch_size: {batching.max_batch_size}",
             f"input [\n{tensors(spec.inputs)}\n]", f"output [\n{tensors(spec.outputs)}\n]",
             "instance_group [ { kind: KIND_CPU count: 1 } ]"]
    if batching.dynamic_batching:
        lines.append("dynamic_batching { }")
    reason = batching.reason.replace('"', "'")
    lines.append(f'parameters: {{ key: "stitch_batching" value: {{ string_value: "{reason}" }} }}')
    return "\n".join(lines) + "\n"


def write_repository(artifact: str, directory: str, *, model_name: str = "stitched",
                     max_batch_size: int | None = None, stock_onnx: bool = False) -> str:
    """Write the repository; returns the model's folder. The artifact is checked first.
    ``stock_onnx`` (an ONNX artifact only): also the stock GPU pipeline (``triton_onnx``),
    which a server without Triton's ONNX Runtime backend cannot load."""
    onnx_graph = None
    if artifact.endswith(".onnx"):
        manifest, epilogue, onnx_graph = read_onnx(artifact)
    else:
        manifest, epilogue = read_manifest(artifact)
    spec = ServeSpec.from_manifest(manifest, max_batch_size=max_batch_size,
                                   epilogue_calls=len(epilogue))
    if spec.batching.dynamic_batching:
        # Triton would merge requests before any probe could run: stay per request here
        spec = ServeSpec(spec.inputs, spec.outputs, spec.constants, disable_merging(
            spec.batching, "requests are not merged in a generated repository (Triton would "
            "merge them before stitch could probe row independence); add dynamic_batching "
            "to config.pbtxt by hand if the model's rows are independent"))
    model_dir = os.path.join(directory, model_name)
    version = os.path.join(model_dir, "1")
    if os.path.exists(model_dir) and os.listdir(model_dir):
        raise ServeError(f"{model_dir} exists and is not empty; choose another --triton-repo "
                         "directory or remove it")
    os.makedirs(version, exist_ok=True)
    with open(os.path.join(model_dir, "config.pbtxt"), "w") as f:
        f.write(config_pbtxt(model_name, spec))
    with open(os.path.join(version, "model.py"), "w") as f:
        f.write(MODEL_PY)
    shutil.copyfile(artifact, os.path.join(version, "model.onnx" if onnx_graph else "model.pt2"))
    if onnx_graph is not None and stock_onnx:
        write_stock_onnx(artifact, directory, model_name, onnx_graph, spec)
    return model_dir
