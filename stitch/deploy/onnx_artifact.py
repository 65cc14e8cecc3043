"""The ONNX artifact: ONE ``.onnx`` file, the stitched graph with stitch's JSON in the model's
metadata (``ModelProto.metadata_props``), readable by any ONNX tool.

    graph                      the stitched graph (If for cond, Loop for while_loop; checks
                               lifted to extra outputs)
    stitch.epilogue            the side-effect epilogue (JSON, data, no code)
    stitch.runner              how to call it like the program (OnnxGraph.to_json)
    stitch.manifest            versions, inputs, signature, deployment decision, and the
                               sha256 of the graph (the model without stitch.* metadata), the
                               epilogue and the runner JSON
    stitch.manifest_sha256     sha256 of stitch.manifest

``load`` checks all of it before ONNX Runtime sees the graph. Nothing is pickled; unlike the
``.pt2`` there is no torch-release lock (ONNX is versioned by opset).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import platform
import tempfile

import torch

from .. import pytree_types
from ..epilogue import Epilogue
from ..lower.onnx_export import OnnxGraph
from ..lower.onnx_runtime import OnnxRunner
from ..version import __version__
from .artifact import FORMAT, ArtifactError, input_specs, report_summary
from .loaded import LoadedProgram

FORMAT_VERSION = 1
CONTAINER = "onnx"
KEYS = ("stitch.epilogue", "stitch.runner", "stitch.manifest", "stitch.manifest_sha256")
MAX_BYTES = 2 ** 31 - 1  # protobuf's limit; larger models need ONNX external data


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _graph_bytes(proto) -> bytes:
    """The model without stitch's metadata: what the manifest's graph checksum covers."""
    import onnx

    plain = onnx.ModelProto()
    plain.CopyFrom(proto)
    kept = [p for p in plain.metadata_props if not p.key.startswith("stitch.")]
    del plain.metadata_props[:]
    plain.metadata_props.extend(kept)
    return plain.SerializeToString(deterministic=True)


def save_onnx(path: str, graph, epilogue: Epilogue, *, example, decision=None, report=None,
              dynamic_shapes=None, signature: dict | None = None,
              pytree_types: list[str] = ()) -> str:
    """Write ``graph`` (an OnnxGraph) with stitch's JSON to ``path`` atomically."""
    import onnx

    proto = onnx.load_from_string(graph.model)
    epilogue_json = json.dumps(epilogue.to_json(), indent=1)
    runner_json = json.dumps(graph.to_json(), indent=1)
    manifest = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "container": CONTAINER,
        "runs_with": "onnxruntime",  # what stitch.load runs (deployment: what profiling chose)
        "stitch_version": __version__, "torch_version": torch.__version__,
        "onnx_version": onnx.__version__, "python": platform.python_version(),
        "opsets": {o.domain or "ai.onnx": o.version for o in proto.opset_import},
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "inputs": input_specs(example), "signature": signature,
        "pytree_types": list(pytree_types),
        "dynamic_shapes": None if dynamic_shapes is None else repr(dynamic_shapes),
        "deployment": decision.to_json() if decision is not None else None,
        "report": report_summary(report),
        "entries": {"graph": _sha256(_graph_bytes(proto)),
                    "stitch.epilogue": _sha256(epilogue_json.encode()),
                    "stitch.runner": _sha256(runner_json.encode())},
    }
    manifest_json = json.dumps(manifest, indent=1)
    for key, value in (("stitch.epilogue", epilogue_json), ("stitch.runner", runner_json),
                       ("stitch.manifest", manifest_json),
                       ("stitch.manifest_sha256", _sha256(manifest_json.encode()))):
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, value
    data = proto.SerializeToString(deterministic=True)
    if len(data) > MAX_BYTES:
        raise ArtifactError(f"the ONNX model is {len(data) / 2**30:.1f} GiB; one .onnx file "
                            "holds at most 2 GiB (protobuf). Save the .pt2 instead.")
    directory = os.path.dirname(os.path.abspath(path)) or "."
    handle, tmp = tempfile.mkstemp(dir=directory, prefix=".stitch-", suffix=".onnx.partial")
    try:
        with os.fdopen(handle, "wb") as f:
            f.write(data)
        os.replace(tmp, path)  # atomic: never a half-written file at the destination
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def read_onnx(path: str):
    """Check the file; returns (manifest, epilogue, OnnxGraph). ArtifactError saying why."""
    try:
        import onnx
        from google.protobuf.message import DecodeError
    except ImportError as e:
        raise ArtifactError(f"{path}: reading an ONNX artifact needs onnx ({e}); pip install "
                            "'torch-stitch[onnx]'") from None
    if not os.path.exists(path):
        raise ArtifactError(f"{path}: no such file")
    with open(path, "rb") as f:
        data = f.read()
    try:
        proto = onnx.load_from_string(data)
    except (DecodeError, ValueError, RuntimeError) as e:
        raise ArtifactError(f"{path}: not an ONNX model (truncated, corrupted, or another "
                            f"kind of file: {type(e).__name__}: {str(e)[:120]})") from None
    props = {p.key: p.value for p in proto.metadata_props}
    if "stitch.manifest" not in props or not proto.graph.node:
        raise ArtifactError(f"{path}: not a stitch artifact (no stitch.manifest in the ONNX "
                            "metadata; a plain ONNX model? run it with onnxruntime directly)")
    missing = [k for k in KEYS if k not in props]
    if missing:
        raise ArtifactError(f"{path}: stitch metadata incomplete (missing {missing})")
    if props["stitch.manifest_sha256"] != _sha256(props["stitch.manifest"].encode()):
        raise ArtifactError(f"{path}: the manifest does not match its checksum (tampered with "
                            "or damaged)")
    try:
        manifest = json.loads(props["stitch.manifest"])
        if manifest.get("format") != FORMAT or manifest.get("container") != CONTAINER:
            raise ArtifactError(f"{path}: manifest format {manifest.get('format')!r}/"
                                f"{manifest.get('container')!r}, expected {FORMAT!r}/"
                                f"{CONTAINER!r}")
        if manifest.get("format_version") != FORMAT_VERSION:
            raise ArtifactError(f"{path}: ONNX artifact format version "
                                f"{manifest.get('format_version')}, this stitch reads "
                                f"{FORMAT_VERSION}; re-export it")
        entries = manifest["entries"]
        found = {"graph": _sha256(_graph_bytes(proto)),
                 "stitch.epilogue": _sha256(props["stitch.epilogue"].encode()),
                 "stitch.runner": _sha256(props["stitch.runner"].encode())}
        for name, digest in found.items():
            if entries.get(name) != digest:
                raise ArtifactError(f"{path}: {name} fails its checksum (corrupted or "
                                    "tampered with)")
        epilogue = Epilogue.from_json(json.loads(props["stitch.epilogue"]))
        graph = OnnxGraph.from_json(_graph_bytes(proto), json.loads(props["stitch.runner"]))
    except (KeyError, ValueError, TypeError) as e:
        raise ArtifactError(f"{path}: damaged artifact ({type(e).__name__}: {e})") from None
    return manifest, epilogue, graph


def load_onnx(path: str):
    """Check, then load, an ONNX artifact: a LoadedProgram running it with ONNX Runtime."""
    manifest, epilogue, graph = read_onnx(path)
    pytree_types.register(manifest.get("pytree_types", []))
    try:
        runner = OnnxRunner(graph)
    except Exception as e:  # noqa: BLE001 - ORT's refusal, with the file named
        raise ArtifactError(f"{path}: ONNX Runtime cannot load the graph: "
                            f"{type(e).__name__}: {str(e)[:300]}") from None
    return LoadedProgram(runner, epilogue, manifest, path)
