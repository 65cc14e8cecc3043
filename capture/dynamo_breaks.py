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

from . import torch_messages as tm


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


@contextlib.contextmanager
def tolerant_recompile_reasons() -> Iterator[None]:
    """Dynamo (torch 2.14) explains each recompile by re-evaluating its no-tensor-aliasing
    guard's sources in the new frame; for a resume function called with two names for one
    tensor (a branch arm stitch wrote: ``h`` and the object ``h`` held before the ``if``)
    that evaluation raised ``IndexError: list index out of range`` out of Dynamo, and the
    model's run failed. The reason is only text: where it cannot be computed it says so and
    the recompile goes on."""
    import torch._dynamo.guards as guards

    original = getattr(guards, "recompilation_reason_for_no_tensor_aliasing_guard", None)
    if original is None:  # another torch: nothing to mend
        yield
        return

    def reason(*args, **kwargs):  # any torch's signature
        try:
            return original(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - a diagnostic must not fail the run
            return [f"Duplicate tensors found (sources not readable here: {type(e).__name__})"]

    guards.recompilation_reason_for_no_tensor_aliasing_guard = reason
    try:
        yield
    finally:
        guards.recompilation_reason_for_no_tensor_aliasing_guard = original


# a higher-order op (a rewritten branch's torch.cond, a while_loop) that fails while Dynamo
# traces it: torch's own message deep in the developer context (tm.HOP_CALL_FAILED)
HOP_MARK = "higher-order op failed: "


def _first_paragraphs(reason: str, limit: int = 600) -> str:
    """Dynamo's reason without its boilerplate prefix, trimmed to a readable length; where
    the break is a torch.cond/while_loop that failed to trace, torch's message is kept
    (``HOP_MARK``), however far down it was."""
    text = reason.strip()
    if tm.matches(tm.BREAK_PREAMBLE, text) and "\n\n" in text:
        text = text.split("\n\n", 1)[1]
    failed = tm.search(tm.HOP_CALL_FAILED, text)
    if failed is None:
        return text[:limit]
    message = " ".join(failed.group(3).strip().strip("\"'").replace("\\'", "'")
                       .replace("\\n", " ").split())
    return (f"{text[:limit]}\n{HOP_MARK}torch.{failed.group(1)}: {failed.group(2)}: "
            f"{message[:300]}")


def hop_failure(reason: str, op: str | None = None) -> str | None:
    """torch's message for a torch.cond/while_loop (``op``: "cond" or "while_loop" only)
    that failed to trace, from a break's reason (``_first_paragraphs``); None for any other
    break."""
    found = reason.rsplit(HOP_MARK, 1)
    if len(found) != 2 or (op is not None and not found[1].startswith(f"torch.{op}:")):
        return None
    return found[1].strip()
