"""What building a backend gives: a ``Built`` (callable graph + how long it took), or
``BackendUnavailable`` when this machine cannot build it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

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
    onnx_graph: object = None  # the OnnxGraph (stitch.lower.onnx_export), when built
    sides: tuple = ()  # the branch sides checked forced (onnx_forced.SideCheck), when built
    pieces: tuple = ()  # regional: each piece's decision (regional_choice.PieceDecision)
    as_called: Callable | None = None  # the model candidate: run on a call's inputs as given
