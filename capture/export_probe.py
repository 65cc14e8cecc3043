"""The export probe: where torch.export stops although torch.compile kept one graph.

Dynamo turns some Python on tensors into graph ops without a break: ``assert (x > 0).all()``
becomes an in-graph check, a size from a masked index stays symbolic. torch.export
(non-strict) runs the forward in Python on traced values and needs a concrete bool or int
there ("Could not guard on data-dependent expression u0 > 2"), so those lines stop it while
the census counts no break. The probe exports a deep copy of the model on example 0 and
names the innermost user line of the first failure as a site (``found_by=export``)::

    assert (x > 0).all(), "negative"   # compile: one graph; export: a data-dependent guard

One export names one failure: torch.export stops at the first. A failure at a line Dynamo
already broke at adds nothing (the site is listed); the probe says so. When the first
failure is data-dependent, ``torch.export.draft_export`` (a second export; it goes on past
such a line with example 0's real values) names the further lines, best effort: it fails
on some models (then the first failure is what the census has, and it says why).
"""

from __future__ import annotations

import ast
import contextlib
import copy
import logging
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, replace
from enum import StrEnum

import torch

from . import torch_messages as tm
from .errors import gist
from .inputs import Example
from .isolation import silenced_output
from .sites import (
    DYNAMIC_SHAPE_OPS,
    SCALAR_READ_BUILTINS,
    SCALAR_READ_METHODS,
    BreakKind,
    BreakSite,
    Evidence,
    FoundBy,
    called_names,
    classify,
    side_effect_calls,
)
from .size_tensors import sizes_through_tensors
from .source import (
    assert_aliases,
    is_user_file,
    qualname_at,
    source_line,
    statement_at,
    warn_aliases,
)

# what torch.export says when the forward needs a Python value of a traced tensor or size
DATA_DEPENDENT = tm.DATA_DEPENDENT_STOPS
# loggers that print the partial graph of a failed export on the console
_EXPORT_LOGGERS = ("torch.export", "torch._export", "torch._export.non_strict_utils",
                   "torch.fx.experimental.symbolic_shapes", "torch._dynamo")


class ProbeOutcome(StrEnum):
    EXPORTED = "exported"  # torch.export succeeded on example 0: nothing more stops it there
    NEW_SITE = "new_site"  # it stopped at a line Dynamo did not report: a site of its own
    AT_DYNAMO_SITE = "at_dynamo_site"  # it stopped at a site Dynamo reported already
    OUTSIDE_USER_CODE = "outside_user_code"  # it failed with no user line to name
    SKIPPED = "skipped"  # the model is not an nn.Module: torch.export takes modules only


@dataclass(frozen=True)
class ExportProbe:
    """What the export probe found (kept on the census, printed by its summary)."""

    outcome: ProbeOutcome
    error: str = ""  # "<ExceptionType>: <first line>" of the failure
    location: str = ""  # file:line torch.export stopped at, when a user line is known
    site: str = ""  # id of the site at that line (new or Dynamo's)
    more: tuple[str, ...] = ()  # ids of further sites draft_export named
    draft: str = ""  # why draft_export named nothing more, when it ran and failed

    def __str__(self) -> str:
        text = self._first()
        if self.more:
            text += f"; draft_export named {len(self.more)} more: {', '.join(self.more)}"
        return text + (f"; {self.draft}" if self.draft else "")

    def _first(self) -> str:
        match self.outcome:
            case ProbeOutcome.EXPORTED:
                return "export probe: torch.export succeeded on example 0"
            case ProbeOutcome.NEW_SITE:
                return (f"export probe: torch.export stopped at {self.site} ({self.location}), "
                        "where Dynamo reported no break")
            case ProbeOutcome.AT_DYNAMO_SITE:
                return (f"export probe: torch.export stopped at {self.site} ({self.location}), "
                        "a site Dynamo reported")
            case ProbeOutcome.OUTSIDE_USER_CODE:
                return f"export probe: torch.export failed outside user code: {self.error}"
        return "export probe: skipped (torch.export takes an nn.Module only)"

    def to_json(self) -> dict:
        return {"outcome": self.outcome.value, "error": self.error, "location": self.location,
                "site": self.site, "more": list(self.more), "draft": self.draft}


def probe_export(work, example: Example, sites: list[BreakSite]
                 ) -> tuple[list[BreakSite], ExportProbe]:
    """Export a deep copy of ``work`` (non-strict) on ``example``: the sites its failure
    names that are not among ``sites`` (the first failure, then draft_export's), and what
    happened."""
    if not isinstance(work, torch.nn.Module):
        return [], ExportProbe(ProbeOutcome.SKIPPED)
    try:
        with _quiet_export(), silenced_output(), sizes_through_tensors():
            torch.export.export(_copy(work), tuple(example.args), dict(example.kwargs),
                                strict=False)
    except Exception as error:  # noqa: BLE001 - every failure is reported, none raised
        found, probe = _named(error, sites)
        data_dependent = tm.first_of(DATA_DEPENDENT, str(error)) is not None
    else:
        return [], ExportProbe(ProbeOutcome.EXPORTED)
    if not data_dependent:
        return found, probe
    known = {s.location for s in [*sites, *found]}
    more, why = _named_by_draft(work, example, known, len(sites) + len(found) + 1)
    return [*found, *more], replace(probe, more=tuple(s.id for s in more), draft=why)


def _copy(work: torch.nn.Module) -> torch.nn.Module:
    try:
        return copy.deepcopy(work)
    except Exception:  # noqa: BLE001 - uncopyable handles: the census restores work's state
        return work


def _named(error: BaseException, sites: list[BreakSite]) -> tuple[list[BreakSite], ExportProbe]:
    text, summary = str(error), gist(error)
    frame = innermost_user_frame(error)
    if frame is None:
        return [], ExportProbe(ProbeOutcome.OUTSIDE_USER_CODE, summary[:300])
    filename, lineno, name = frame
    location = f"{filename}:{lineno}"
    known = next((s for s in sites if s.location == location), None)
    if known is not None:
        return [], ExportProbe(ProbeOutcome.AT_DYNAMO_SITE, summary[:300], location, known.id)
    site = _site(f"S{len(sites) + 1}", text, type(error).__name__, filename, lineno, name,
                 _call_chain(error))
    return [site], ExportProbe(ProbeOutcome.NEW_SITE, summary[:300], location, site.id)


def _named_by_draft(work, example: Example, known: set[str],
                    first_index: int) -> tuple[list[BreakSite], str]:
    """Data-dependent failures draft_export reports at lines not in ``known``, as sites."""
    try:
        from torch._logging.structured import INTERN_TABLE  # its stacks name files by index

        # without sizes_through_tensors(): a mode's frame cuts the user stacks draft_export
        # reports
        with _quiet_export(), silenced_output():
            program = torch.export.draft_export(_copy(work), tuple(example.args),
                                                dict(example.kwargs))
        failures = program._report.failures
        files = {index: name for name, index in INTERN_TABLE.items()}
    except Exception as error:  # noqa: BLE001 - best effort: the first failure stands
        return [], f"draft_export named nothing more ({type(error).__name__})"
    sites: list[BreakSite] = []
    for failure in failures:
        if failure.failure_type.name != "DATA_DEPENDENT_ERROR":
            continue
        stack = [(files.get(f.get("filename"), f.get("filename")), f.get("line"), f.get("name"))
                 for f in failure.data.get("user_stack", ())]
        user = [f for f in stack if isinstance(f[0], str) and is_user_file(f[0])]
        if not user or f"{user[-1][0]}:{user[-1][1]}" in known:
            continue
        filename, lineno, name = user[-1]
        known.add(f"{filename}:{lineno}")
        text = f"{tm.GUARD_ON_DATA_TEXT} {failure.data.get('expr', '')} (found by draft_export)"
        chain = tuple(f"{f}:{ln} in {qualname_at(f, ln) or n}" for f, ln, n in user)
        sites.append(_site(f"S{first_index + len(sites)}", text, "", filename, lineno, name,
                           chain))
    return sites, ""


def innermost_user_frame(error: BaseException) -> tuple[str, int, str] | None:
    """The user line a failed export names: its "raised this error" section, else the
    innermost user frame of the traceback (of the error or what caused it)."""
    seen: set[int] = set()
    chain: BaseException | None = error
    while chain is not None and id(chain) not in seen:
        seen.add(id(chain))
        text = str(chain)
        raised = tm.split_at(tm.CALL_RAISED_SECTION, text)
        if raised is not None:
            named = [fr for fr in tm.frames(raised[1]) if is_user_file(fr[0])]
            if named:
                return named[-1]
        user = [(f.filename, f.lineno or 0, f.name)
                for f in traceback.extract_tb(chain.__traceback__) if is_user_file(f.filename)]
        if user:
            return user[-1]
        chain = chain.__cause__ or chain.__context__
    return None


def _site(site_id: str, text: str, error_type: str, filename: str, lineno: int, name: str,
          call_chain: tuple[str, ...]) -> BreakSite:
    marker = tm.first_found(DATA_DEPENDENT, text)
    gb_type = f"torch.export: {marker or error_type}"
    statement = statement_at(filename, lineno)
    node = statement.node if statement else None
    calls = called_names(node)
    evidence = Evidence(gb_type, text[:600], node, calls,
                        side_effect_calls(node, warn_aliases(filename)),
                        assert_aliases(filename))
    kind, rule = classify(evidence) if marker else (BreakKind.OTHER, "torch.export failed")
    if kind is BreakKind.SCALAR_READ and tm.matches(tm.SIZE_LIKE_SYMBOLS, text) \
            and not _reads_scalar(node):
        kind, rule = BreakKind.DYNAMIC_SHAPE, "guard on a data-dependent size"
    elif kind is BreakKind.SCALAR_READ and calls & DYNAMIC_SHAPE_OPS:
        kind, rule = BreakKind.DYNAMIC_SHAPE, "guard on a data-dependent size"
    return BreakSite(
        id=site_id, kind=kind, rule=f"export probe: {rule}", gb_type=gb_type,
        reason=_reason(text), filename=filename, lineno=lineno,
        source_line=source_line(filename, lineno),
        function=qualname_at(filename, lineno) or name, count=0,
        call_chain=call_chain, stopped_in=f"{filename}:{name}",
        data_dependent=marker is not None, found_by=FoundBy.EXPORT)


def _reads_scalar(node: ast.stmt | None) -> bool:
    return bool(called_names(node) & (SCALAR_READ_METHODS | SCALAR_READ_BUILTINS))


def _reason(text: str) -> str:
    """torch.export's first paragraph (the expression it could not decide), not its advice."""
    first = text.strip().split("\n\n", 1)[0].strip()
    return f"{first} (torch.export stopped here; Dynamo did not break here)"[:600]


def _call_chain(error: BaseException) -> tuple[str, ...]:
    frames = traceback.extract_tb(error.__traceback__)
    return tuple(f"{f.filename}:{f.lineno} in {qualname_at(f.filename, f.lineno or 0) or f.name}"
                 for f in frames if is_user_file(f.filename))


@contextlib.contextmanager
def _quiet_export() -> Iterator[None]:
    """A failed export logs its partial graph; the probe reports the failure instead."""
    levels = {name: logging.getLogger(name).level for name in _EXPORT_LOGGERS}
    for name in _EXPORT_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
