"""The deployment artifact: ONE file, the AOTInductor ``.pt2`` package, with stitch's JSON
inside it.

    <name>/data/aotinductor/...           the compiled stitched graph (AOTInductor)
    <name>/extra/stitch/epilogue.json     the side-effect epilogue (data, no code)
    <name>/extra/stitch/manifest.json     versions, input specs, deployment decision,
                                          sha256 of every other entry
    zip comment                           sha256 of manifest.json

``load`` checks all of it before any compiled code is loaded. Nothing is pickled.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import platform
import tempfile
import zipfile
from typing import Any

import torch
import torch.utils._pytree as pytree

from .. import pytree_types
from ..epilogue import Epilogue
from ..errors import StitchError
from ..lower.cudagraphs import CudaGraphRunner
from ..version import __version__
from .loaded import LoadedProgram

FORMAT = "stitch-artifact"
FORMAT_VERSION = 1
COMMENT_PREFIX = b"stitch-manifest-sha256:"


class ArtifactError(StitchError):
    """The artifact is missing, damaged, tampered with, or made for another torch."""


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def input_specs(example) -> list[dict]:
    leaves = pytree.tree_flatten_with_path((example.args, example.kwargs))[0]
    out = []
    for path, leaf in leaves:
        name = pytree.keystr(path)
        if isinstance(leaf, torch.Tensor):
            out.append({"name": name, "shape": list(leaf.shape), "dtype": str(leaf.dtype),
                        "device": str(leaf.device)})
        else:
            out.append({"name": name, "constant": leaf})
    return out


def save(path: str, package_path: str, epilogue: Epilogue, *, example, decision=None,
         report=None, dynamic_shapes: Any = None, signature: dict | None = None,
         pytree_types: list[str] = (), runs_with: str = "aoti", pieces: dict | None = None
         ) -> str:
    """Add stitch's JSON to an AOTInductor package (``runs_with="aoti"``), or to a regional
    PT2 archive (``"regional"``, with its ``pieces``: ``regional_artifact``), and write it to
    ``path`` atomically."""
    with zipfile.ZipFile(package_path) as src:
        infos = src.infolist()
        root = infos[0].filename.split("/", 1)[0]
        payload = {i.filename: src.read(i.filename) for i in infos}
    extra = f"{root}/extra/stitch"
    payload[f"{extra}/epilogue.json"] = json.dumps(epilogue.to_json(), indent=1).encode()
    manifest = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "stitch_version": __version__,
        "torch_version": torch.__version__, "python": platform.python_version(),
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "runs_with": runs_with,  # what stitch.load runs (deployment: what profiling chose)
        "root": root, "inputs": input_specs(example), "signature": signature,
        "pytree_types": list(pytree_types),  # registered by stitch.load before loading
        "dynamic_shapes": None if dynamic_shapes is None else repr(dynamic_shapes),
        "deployment": decision.to_json() if decision is not None else None,
        "report": report_summary(report),
        **({"pieces": pieces} if pieces is not None else {}),
        "entries": {name: _sha256(data) for name, data in sorted(payload.items())},
    }
    manifest_bytes = json.dumps(manifest, indent=1).encode()
    directory = os.path.dirname(os.path.abspath(path)) or "."
    handle, tmp = tempfile.mkstemp(dir=directory, prefix=".stitch-", suffix=".pt2.partial")
    os.close(handle)
    try:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as out:
            for name, data in payload.items():
                out.writestr(name, data)
            out.writestr(f"{extra}/manifest.json", manifest_bytes)
            out.comment = COMMENT_PREFIX + _sha256(manifest_bytes).encode()
        os.replace(tmp, path)  # atomic: never a half-written file at the destination
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def report_summary(report) -> dict | None:
    if report is None:
        return None
    return {"graphs_before": report.graphs_before, "graphs_after": report.graphs_after,
            "guards": list(getattr(report, "guards", ())),
            "decisions": [d.to_json() for d in report.decisions],
            "checks": [c.__dict__ for c in report.checks]}


def read_manifest(path: str) -> tuple[dict, Epilogue]:
    """Check the file and return (manifest, epilogue); raises ArtifactError saying why."""
    if not os.path.exists(path):
        raise ArtifactError(f"{path}: no such file")
    if not zipfile.is_zipfile(path):
        raise ArtifactError(f"{path}: not a stitch artifact (not a zip archive; truncated, "
                            "corrupted, or another kind of file)")
    try:
        with zipfile.ZipFile(path) as z:
            names = set(z.namelist())
            manifest_name = next((n for n in names if n.endswith("/extra/stitch/manifest.json")),
                                 None)
            if manifest_name is None:
                raise ArtifactError(f"{path}: not a stitch artifact (no extra/stitch/manifest."
                                    "json; a plain AOTInductor package? load it with "
                                    "torch._inductor.aoti_load_package)")
            manifest_bytes = z.read(manifest_name)
            comment = z.comment
            if not comment.startswith(COMMENT_PREFIX) or \
                    comment[len(COMMENT_PREFIX):].decode() != _sha256(manifest_bytes):
                raise ArtifactError(f"{path}: the manifest does not match its checksum "
                                    "(tampered with or damaged)")
            manifest = json.loads(manifest_bytes)
            _check_format(path, manifest)
            expected = manifest["entries"]
            others = names - {manifest_name}
            if set(expected) != others:
                added, missing = sorted(others - set(expected)), sorted(set(expected) - others)
                raise ArtifactError(f"{path}: entries differ from the manifest (added: "
                                    f"{added[:3]}, missing: {missing[:3]})")
            for name, digest in expected.items():
                if _sha256(z.read(name)) != digest:
                    raise ArtifactError(f"{path}: entry {name} fails its checksum (corrupted "
                                        "or tampered with)")
            epilogue = Epilogue.from_json(
                json.loads(z.read(f"{manifest['root']}/extra/stitch/epilogue.json")))
    except (zipfile.BadZipFile, EOFError, OSError, KeyError, ValueError) as e:
        raise ArtifactError(f"{path}: damaged artifact ({type(e).__name__}: {e})") from None
    return manifest, epilogue


def _check_format(path: str, manifest: dict) -> None:
    if manifest.get("format") != FORMAT:
        raise ArtifactError(f"{path}: manifest format {manifest.get('format')!r}, expected "
                            f"{FORMAT!r}")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise ArtifactError(f"{path}: artifact format version {manifest.get('format_version')}"
                            f", this stitch reads version {FORMAT_VERSION}; re-export it")
    made, here = manifest.get("torch_version", "?"), torch.__version__
    if made.split("+")[0].split(".")[:2] != here.split("+")[0].split(".")[:2]:
        raise ArtifactError(f"{path}: made by torch {made}; this is torch {here}. "
                            "AOTInductor packages only load in the torch release that built "
                            "them: re-export with this torch.")


def load_aoti(path: str, manifest: dict, epilogue: Epilogue) -> LoadedProgram:
    """A checked (``read_manifest``) whole-graph ``.pt2`` artifact, run with AOTInductor."""
    pytree_types.register(manifest.get("pytree_types", []))  # e.g. transformers' DynamicCache
    runner = torch._inductor.aoti_load_package(path)
    if aoti_replays_from_cudagraphs(manifest.get("deployment")) and torch.cuda.is_available():
        runner = CudaGraphRunner(runner)  # captured per input shape on first use
    return LoadedProgram(runner, epilogue, manifest, path)


def aoti_replays_from_cudagraphs(decision: dict | None) -> bool:
    """The artifact holds the AOTInductor graph; it is replayed from CUDA graphs when the
    profiling that made it found AOTInductor + CUDA graphs correct and faster than without."""
    by_name = {c["backend"] + ("+cudagraphs" if c["cudagraphs"] else ""): c
               for c in (decision or {}).get("candidates", [])}
    with_graphs, plain = by_name.get("aoti+cudagraphs"), by_name.get("aoti")
    return bool(with_graphs and plain and with_graphs["correct"] and plain["correct"]
                and with_graphs["median_ms"] is not None and plain["median_ms"] is not None
                and with_graphs["median_ms"] < plain["median_ms"])
