"""``stitch.load``: an artifact back as a callable, by its kind (``.onnx``, or a ``.pt2``
holding the whole graph or a regionally lowered one)."""

from __future__ import annotations

from .. import pytree_types
from .artifact import load_aoti, read_manifest
from .loaded import LoadedProgram
from .onnx_artifact import load_onnx
from .regional_artifact import RUNS_WITH, load_regional


def load(path: str) -> LoadedProgram:
    """Check, then load, an artifact (``.pt2``: ``artifact``, or ``regional_artifact`` where
    its manifest says it runs regionally; ``.onnx``: ``onnx_artifact``); returns a callable
    running graph + epilogue. Everything is checked before any compiled code is loaded."""
    if str(path).endswith(".onnx"):
        return load_onnx(path)
    manifest, epilogue = read_manifest(path)
    if manifest.get("runs_with") == RUNS_WITH:
        pytree_types.register(manifest.get("pytree_types", []))
        return load_regional(path, manifest, epilogue)
    return load_aoti(path, manifest, epilogue)
