"""The rewrite-and-export step: rewrite rounds until no fixable site is left, then
torch.export of the rewritten model; a break torch.export runs into that Dynamo did not
report is rewritten too, and a size test torch.export decided becomes a cond on the size
(size_rewrite.py)."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from capture import BreakKind, BreakSite
from capture import torch_messages as tm
from capture.errors import gist
from capture.inputs import Example
from capture.source import is_user_file
from capture.traced_breaks import break_named_by

from .errors import (
    ExportFailedError,
    GuardsRefusedError,
    StitchError,
    UnfixableBreaksError,
    UnsupportedSideEffectError,
)
from .exporting import Exported, export_model
from .plan import Action, Decision
from .progress import stage
from .refusals import guards_message, unfixable_message, why_left
from .settings import Settings
from .size_rewrite import widened
from .synthesize.convert.reached_helpers import reached_helpers
from .synthesize.convert.rounds import (
    UNCHECKED_FIRST,
    UNCHECKED_USED,
    first_lines,
    loop_to_keep,
    owned,
    resumed_with,
    rewrite_rounds,
)
from .synthesize.operators.rt_checks import guards_met
from .synthesize.operators.rt_inplace import KeptLoop
from .synthesize.operators.rt_pins import pinned_sites
from .synthesize.operators.runtime import RUNS_IN_PYTHON

DEFERRED = {BreakKind.SIDE_EFFECT}  # side effects: the epilogue, at export time
SETTLED = ("left as written; no break there once the other rewrites are in (the census "
           "after them traces it, and so does torch.export)")


def settled(decisions: list[Decision], census_after) -> list[Decision]:
    """A site left as written whose break the last census no longer shows (a loop over a
    ``.tolist()`` of fixed length once scalar reads are captured for another rewrite) is
    traced as written: said so, with why no rewrite was made, not reported as left."""
    seen = {s.location for s in census_after.sites}
    return [replace(d, action=Action.TRACED, reason=f"{SETTLED}; stitch made no rewrite: {d.reason}")
            if d.action == Action.LEFT and d.location not in seen else d for d in decisions]


LEFT_TO_EXPORT = ("an op whose output size is data: left to torch.export, which keeps the "
                  "size symbolic (unbacked); no rewrite needed here")
# breaks the census still shows after the rewrites that torch.export decides: why, by kind
LEFT_KINDS = {
    BreakKind.DYNAMIC_SHAPE: LEFT_TO_EXPORT,
    BreakKind.SCALAR_READ: "a number read from data where the program needs a Python number "
                           "(a size): left to torch.export, which keeps it symbolic "
                           "(unbacked); no rewrite needed here",
}


PYTHON_TEST = ("specialised as written, but while torch.export traced it the test was a Python "
               "bool on every evaluation (a test of Python values, such as `is None` of an "
               "argument): decided as torch.export decides it, no specialisation on data")


def python_tests(decisions: list[Decision], met: dict[str, set[bool]]
                 ) -> tuple[list[Decision], list[Decision]]:
    """The decisions with each guard whose test was a Python bool on every evaluation of
    the export's trace (``met``, from ``guards_met``) said to be so; and the guards left,
    on data, or not evaluated where the trace could tell."""
    def python_only(d: Decision) -> bool:
        path, _, line = d.location.rpartition(":")
        keys = {d.site, f"L{line}@{os.path.basename(path)}"} - {""}
        seen = set().union(*(met.get(k, set()) for k in keys))
        return seen == {True}

    out = [replace(d, action=Action.TRACED, reason=f"{PYTHON_TEST}; {d.reason}")
           if d.action == Action.GUARD and python_only(d) else d for d in decisions]
    return out, [d for d in out if d.action == Action.GUARD]


def _unfixable(remaining, decisions, rewrites, census_after, rounds) -> UnfixableBreaksError:
    error = UnfixableBreaksError(unfixable_message(remaining, decisions), remaining, decisions)
    error.partial = Remaining(remaining, decisions, rewrites, census_after, rounds)
    return error


@dataclass
class Remaining:
    """Breaks no rewrite removed (the program can only be partial)."""

    sites: list[BreakSite]
    decisions: list[Decision]
    rewrites: Any
    census_after: Any
    rounds: int


def symbolic_sizes(ep, decisions: list[Decision]) -> list[Decision]:
    """Where the exported graph first holds each size known only at run time (an unbacked
    symbol in an op's output shape: ``torch.arange(int(n))``, ``nonzero``), at a line of the
    user's no decision names yet: what the census of the rewrite reports as a break left to
    torch.export, read off the graph where no census was taken."""
    known = {d.location for d in decisions}
    seen: set = set()
    out: list[Decision] = []
    for graph_module in ep.graph_module.modules():
        if not isinstance(graph_module, torch.fx.GraphModule):
            continue
        for node in graph_module.graph.nodes:
            shape = getattr(node.meta.get("val"), "shape", None)
            symbols = set().union(*(free_unbacked_symbols(n) for n in shape or ()))
            if not symbols - seen:
                continue
            seen |= symbols
            frame = _user_frame(node.meta.get("stack_trace") or "")
            if frame is not None and frame[0] not in known:
                known.add(frame[0])
                out.append(Decision(Action.SYMBOLIC, frame[0], frame[1], LEFT_TO_EXPORT))
    return out


def _user_frame(stack_trace: str) -> tuple[str, str] | None:
    """(file:line, function) of the innermost frame of the user's code in an fx node's
    stack trace, or None."""
    return next(((f"{path}:{line}", name) for path, line, name in reversed(tm.frames(stack_trace))
                 if is_user_file(path)), None)


def _census_wanted(learnt: dict) -> bool:
    """Whether this pass took its first round with no census of the rewrite
    (``UNCHECKED_USED``): it is then taken again from the first round, each with its census,
    where it does not export as it stands (the census finds what a rewrite exposes and
    whether a site's break is gone; torch.export only stops at the first such place)."""
    if not learnt.pop(UNCHECKED_USED, False):
        return False
    learnt.pop(UNCHECKED_FIRST, None)
    learnt.pop("unchecked", None)
    learnt.pop("resume", None)
    return True


def rewrite_and_export(work, census, inputs: list[Example], dynamic_shapes, strict: bool,
                       settings: Settings, appends: list[str], seconds: dict,
                       rebinds: dict[str, str] | None = None,
                       counters: dict[str, tuple] | None = None,
                       items: dict[str, tuple] | None = None, extra: tuple = (),
                       learnt: dict | None = None):
    if strict and any(s.kind in DEFERRED for s in census.sites):
        sites = ", ".join(s.location for s in census.sites if s.kind in DEFERRED)
        raise UnsupportedSideEffectError(
            f"strict=True cannot defer side effects ({sites}): strict export traces with "
            "Dynamo, which cannot run the epilogue's interception. Use strict=False (the "
            "default); the graph is the same.")
    # breaks torch.export ran into that Dynamo did not report (and size tests it decided)
    found: list[BreakSite] = list(extra)
    pinned = pinned_sites()  # reads pinned to example 0's values (allow_guards), if any
    kept: dict[str, str] = {}  # rewritten loops the export found cannot run so
    reached: dict = {}  # helpers reads reach by calls no name resolves (reached_helpers.py)
    # what one pass's censuses found, for the next (rewrite_rounds); a size-test pass goes
    # on from where the pass before it ended (``resumed_with``)
    learnt = {} if learnt is None else learnt
    quick, passes = learnt.get("quick", False), 0
    while True:
        if quick and passes:  # a pass without a census that did not export as it stood
            raise ExportFailedError("the size tests' rewrite with no census of it did not "
                                    "export; the caller takes the census")
        passes += 1
        seen = replace(census, sites=(*census.sites, *found))
        # from the last pass's rounds; where those are refused, the rounds once more from
        # the first. Not in a pass over size tests (``again``, which sets ``left_out``): its
        # refusal keeps the program before it, verified, with torch.export's guards noted
        resumed = "resume" in learnt and "left_out" not in learnt
        with stage("rewrite", seconds):  # its censuses of the rewritten model included
            rewrites, decisions, census_after, rounds, expected_breaks = rewrite_rounds(
                work, seen, inputs, settings, kept, reached, learnt)
        remaining = [s for s in census_after.sites
                     if s.kind not in DEFERRED and s.location not in expected_breaks
                     and s.stopped_in not in RUNS_IN_PYTHON and s.location not in pinned]
        # an op whose output size is data (Dynamo: "Data dependent operator"), or a read
        # the rewrites left (a read kept as a 0-d tensor reaching an op that takes a Python
        # number: ``out.repeat([n * k + 1, ...])``): torch.export keeps such a size or number
        # symbolic (unbacked), so it decides: exported as it stands, verified as any
        # program, the refusal below only where that export fails
        symbolic = [s for s in remaining if s.kind in LEFT_KINDS]
        remaining = [s for s in remaining if s.kind not in LEFT_KINDS]
        decisions += why_left(remaining, decisions, rounds >= settings.max_rounds,
                              settings.max_rounds)
        if remaining and _census_wanted(learnt):
            continue  # the pass again, each round with its census
        if remaining:
            if resumed:
                continue  # the rounds once more from the first, as before resuming
            if reached_helpers(work, rewrites, inputs[0], reached):
                continue  # a read a break tests came by a call no name resolves: follow it
            raise _unfixable(remaining + symbolic, decisions, rewrites, census_after, rounds)
        decisions += [Decision(Action.SYMBOLIC, s.location, s.function, LEFT_KINDS[s.kind],
                               s.id) for s in symbolic]
        decisions = settled(decisions, census_after)
        guards = [d for d in decisions if d.action == Action.GUARD]
        pending = bool(guards) and not settings.allow_guards
        if pending and resumed:
            continue  # the rounds once more from the first, as before resuming
        try:
            with stage("export", seconds), guards_met() as met:
                ep, epilogue = export_model(work, rewrites, inputs[0], dynamic_shapes, strict,
                                            appends, rebinds, counters, items)
        except StitchError as e:
            if _census_wanted(learnt):
                continue  # the pass again, each round with its census
            unchecked = learnt.pop("unchecked", None)
            if unchecked is not None:  # the pass with no census of its last site's rewrite
                learnt["resume"] = unchecked  # again, with the census
                continue
            if pending:
                # a guard whose test the trace found a Python bool is no guard (as after
                # an export that succeeds): where none is left, the export's own failure
                # is what stops it, handled below as any other
                decisions, guards = python_tests(decisions, met)
                pending = bool(guards)
            if pending:  # refused for the guards, as before any trace
                refusal = GuardsRefusedError(guards_message(guards), (), guards)
                refusal.add_note("torch.export of the rewritten model with those guards "
                                 f"failed too: {gist(e, 300)}")
                raise refusal from None
            if not isinstance(e, KeptLoop | ExportFailedError):
                raise
            loop = loop_to_keep(e)  # an unrolled loop with no static bound while exporting
            if loop is not None and loop[0] not in kept:
                kept[loop[0]] = loop[1]  # the rounds again, with that loop as written
                continue
            if isinstance(e, KeptLoop):
                raise
            if reached_helpers(work, rewrites, inputs[0], reached, e):
                continue  # a read reaches code by a call no name resolves: that code too
            site = break_named_by(e.__cause__, "E", len(found) + 1)
            known = {s.location for s in seen.sites}
            stops = (site is None or site.location in known
                     or len(found) >= settings.max_traced_breaks)
            if stops and resumed:
                continue  # the rounds once more from the first, as before resuming
            if stops:
                if symbolic:  # torch.export did not take the sizes it was left: refused
                    decisions = [d for d in decisions if d.reason not in LEFT_KINDS.values()]
                    decisions += why_left(symbolic, decisions, False, settings.max_rounds)
                    error = _unfixable(symbolic, decisions, rewrites, census_after, rounds)
                    error.add_note("torch.export of the rewritten model: "
                                   f"{first_lines(str(e), 1)[:300]}")
                    raise error from e
                raise
            found.append(owned(site, work))  # rewrite it too, and export again
            if "ended" in learnt:  # in a round after the rounds so far, not from the first
                # first with no census of the rewrite (torch.export finds what it exposes,
                # or exports); where that export fails, the same pass with the census
                learnt["unchecked"] = resumed_with(learnt, (found[-1],))["resume"]
                learnt["resume"] = (learnt.pop("ended"), (found[-1],))
            continue
        learnt.pop("unchecked", None)
        if learnt.get(UNCHECKED_USED):  # no census after the rewrite: the graph says
            decisions += symbolic_sizes(ep, decisions)
        if pending:
            decisions, guards = python_tests(decisions, met)
            if guards:
                raise GuardsRefusedError(guards_message(guards), (), guards)
        def again(sites, left_out: frozenset, quick_only: bool = False):
            # each goes on from this pass's rounds; ``quick_only``: no pass with censuses
            # where the one without fails (a rewrite worth only what its export shows)
            tests = tuple(owned(s, work) for s in sites)

            def attempt(quick: bool):
                nested = resumed_with(learnt, tests, quick)
                nested["left_out"] = left_out | learnt.get("left_out", frozenset())
                return rewrite_and_export(
                    work, census, inputs, dynamic_shapes, strict, settings, appends, seconds,
                    rebinds, counters, items, (*found, *tests), nested)

            if "ended" in learnt:  # first without a census of the rewrite, then with one
                try:
                    return attempt(quick=True)
                except StitchError:
                    if quick_only:
                        raise
            return attempt(quick=False)

        return widened(  # a test on an input's size decided for the examples: a cond too
            Exported(work, rewrites, decisions, rounds, ep, epilogue), again,
            work, inputs[0], {s.location for s in seen.sites} | learnt.get("left_out", set()),
            len(found) + 1)
