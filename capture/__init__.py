"""capture: find where, why and how a model breaks into several graphs (the census)."""

from __future__ import annotations

from .census import Census, ExampleTrace, Fragment, TimelineStep
from .errors import CaptureError, InputError, SourceUnavailableError, StitchError
from .explain import explain
from .sites import BreakKind, BreakSite

__all__ = [
    "BreakKind", "BreakSite", "Census", "CaptureError", "ExampleTrace", "Fragment",
    "InputError", "SourceUnavailableError", "StitchError", "TimelineStep", "explain",
]
