"""stitch: turn a graph-broken PyTorch model into one verified ``torch.export`` graph.

Public API::

    census = stitch.explain(model, args)         # where, why and how it breaks
    program = stitch.export(model, args)         # ONE verified ExportedProgram + epilogue
    program(*args)                               # runs the graph, replays prints/logs
    print(program.report)
"""

from __future__ import annotations

from capture import (
                     BreakKind,
                     BreakSite,
                     CaptureError,
                     Census,
                     InputError,
                     SourceUnavailableError,
                     StitchError,
)
from capture.explain import public_explain as explain  # with the torch.export probe

from .deploy import ArtifactError, load
from .deploy.compile import compile
from .deploy.tensorrt import tensorrt_plan
from .deploy.tensorrt_engine import tensorrt_engine
from .errors import (
                     ExportFailedError,
                     GuardsRefusedError,
                     SpecializationError,
                     UnfixableBreaksError,
                     UnsupportedSideEffectError,
                     VerificationError,
)
from .pipeline import export
from .program import PartialProgram, StitchedProgram
from .settings import Settings
from .synthesize.operators.rt_union import Alternatives, resolve
from .version import __version__

__all__ = [
    "Alternatives", "PartialProgram", "ArtifactError", "compile", "load", "tensorrt_engine", "tensorrt_plan",
    "BreakKind", "BreakSite", "CaptureError", "Census", "ExportFailedError", "GuardsRefusedError", "InputError",
    "Settings", "SourceUnavailableError", "SpecializationError", "StitchError", "StitchedProgram",
    "UnfixableBreaksError", "UnsupportedSideEffectError", "VerificationError", "explain",
    "export", "resolve", "__version__",
]
