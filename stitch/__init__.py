"""stitch: turn a graph-broken PyTorch model into one verified ``torch.export`` graph.

Public API::

    census = stitch.explain(model, args)      # where, why and how it breaks
    print(census)
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
                     explain,
)

__version__ = "0.1.0"

__all__ = [
    "BreakKind", "BreakSite", "CaptureError", "Census", "InputError", "SourceUnavailableError",
    "StitchError", "explain", "__version__",
]
