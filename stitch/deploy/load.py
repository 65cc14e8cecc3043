"""``stitch.load``: an artifact back as a callable, by its kind (``.onnx`` or ``.pt2``)."""

from __future__ import annotations

from .artifact import load_pt2
from .loaded import LoadedProgram
from .onnx_artifact import load_onnx


def load(path: str) -> LoadedProgram:
    """Check, then load, an artifact (``.pt2``: ``artifact``; ``.onnx``: ``onnx_artifact``);
    returns a callable running graph + epilogue. Everything is checked before any compiled
    code is loaded."""
    if str(path).endswith(".onnx"):
        return load_onnx(path)
    return load_pt2(path)
