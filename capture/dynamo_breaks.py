"""Record every graph break Dynamo logs, with its type, text and user stack.

``torch._dynamo.explain`` keeps a break reason only when a non-empty graph was compiled
before it, so a ``print`` or ``warnings.warn`` right after another break goes unreported.
Dynamo's own graph-break log (``InstructionTranslatorBase.log_graph_break``) sees every
break; we listen to it, only inside the ``recording_breaks`` context, and restore it after.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch._dynamo.symbolic_convert import InstructionTranslatorBase


@dataclass(frozen=True)
class Frame:
    filename: str
    lineno: int
    name: str
    line: str

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno} in {self.name}"


@dataclass(frozen=True)
class RawBreak:
    """One graph break as Dynamo logged it (several may describe the same site)."""

    gb_type: str
    reason: str
    stack: tuple[Frame, ...]  # outermost first; the last frame is where tracing stopped


@contextlib.contextmanager
def recording_breaks() -> Iterator[list[RawBreak]]:
    records: list[RawBreak] = []
    original = InstructionTranslatorBase.log_graph_break

    def log_graph_break(self, code_options, reason, exc):
        if not getattr(exc, "logged", False):
            try:
                stack = getattr(exc, "real_stack", None)
                if stack is None:
                    stack = torch._guards.TracingContext.extract_stack()
                frames = tuple(
                    Frame(f.filename, f.lineno or 0, f.name, (f.line or "").strip())
                    for f in stack
                )
                if not frames:
                    frames = (Frame(code_options["co_filename"],
                                    code_options["co_firstlineno"],
                                    code_options.get("co_name", "?"), ""),)
                gb_type = getattr(exc, "gb_type", None) or type(exc).__name__
                records.append(RawBreak(str(gb_type), _first_paragraphs(reason), frames))
            except Exception:  # noqa: BLE001 - recording must never change Dynamo's behaviour
                pass
        return original(self, code_options, reason, exc)

    InstructionTranslatorBase.log_graph_break = log_graph_break
    try:
        yield records
    finally:
        InstructionTranslatorBase.log_graph_break = original


def _first_paragraphs(reason: str, limit: int = 600) -> str:
    """Dynamo's reason without its boilerplate prefix, trimmed to a readable length."""
    text = reason.strip()
    prefix = "Encountered graph break when attempting to trace"
    if text.startswith(prefix) and "\n\n" in text:
        text = text.split("\n\n", 1)[1]
    return text[:limit]
