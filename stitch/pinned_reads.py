"""After a refusal, with ``Settings(allow_guards=True)``: export again with the scalar reads
at the sites left pinned to example 0's values, each checked in the graph
(synthesize/operators/rt_pins.py). Without guards, the refusal says which reads could be pinned."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch

from capture.errors import gist
from capture.inputs import Example
from capture.isolation import model_copy, preserved_rng, silenced_output
from capture.reachable import restore
from capture.source import enclosing_function, header_lines, is_user_file
from capture.traced_breaks import break_named_by

from .errors import ExportFailedError, StitchError, UnfixableBreaksError, VerificationError
from .plan import Action, Decision
from .report import noted
from .synthesize.convert.censuses import CAPTURABLE
from .synthesize.operators.rt_pin_sizes import SizePin, pinned_sizes, recording_sizes
from .synthesize.operators.rt_pins import Pin, pinned, recording

REFUSALS = (UnfixableBreaksError, ExportFailedError, VerificationError)
# breaks Dynamo shows at an op of data-dependent output size (``repeat_interleave`` by counts,
# mask indexing: "graph break in loop" around one), which torch.export traces with a symbolic
# size: the pinned export takes them as they are (``synthesize.convert.censuses.CAPTURABLE``)
TAKEN_AS_THEY_ARE = CAPTURABLE


def eager_reads(model, example: Example, initial: list,
                lines: dict[str, set[int]]) -> tuple[dict[str, Pin], dict[str, SizePin]]:
    """The scalar reads one eager run of example 0 makes, by file:line, and the output
    shapes of the torch calls made at ``lines`` (file -> line numbers); the Python state the
    run changed is put back (``initial``, reachable.snapshot's)."""
    try:
        with recording() as reads, recording_sizes(lines) as sizes, preserved_rng(), \
                silenced_output(), torch.no_grad():
            model_copy(model)(*example.args, **example.kwargs)
    except Exception:  # noqa: BLE001 - nothing to pin; the refusal stands as it was
        return {}, {}
    finally:
        restore(initial)
    return reads, sizes


def _sites(refusal: StitchError) -> list:
    """The break sites a refusal names: the sites left, or the one torch.export stopped at."""
    sites = list(getattr(refusal, "sites", ()))
    if isinstance(refusal, ExportFailedError):
        site = break_named_by(refusal.__cause__, "E", 1)
        sites += [site] if site is not None else []
    return sites


def _span(site, whole: bool) -> range:
    """The lines of the site's statement header, or (``whole``) of its whole function."""
    if whole:
        function = enclosing_function(site.filename, site.lineno)
        if function is not None:
            return range(function.lineno, (function.end_lineno or function.lineno) + 1)
    return header_lines(site.filename, site.lineno)


def _lines(sites: list, whole: bool = False) -> dict[str, set[int]]:
    """The lines of each site's header (or function), by file."""
    out: dict[str, set[int]] = {}
    for site in sites:
        out.setdefault(site.filename, set()).update(_span(site, whole))
    return out


@dataclass(frozen=True)
class _Frame:
    """Where a failed export stopped in the model's code (its innermost user frame)."""

    filename: str
    lineno: int
    kind: str = ""

    @property
    def location(self) -> str:
        return f"{self.filename}:{self.lineno}"


def _failed_at(refusal: StitchError) -> list:
    """The innermost frame of the model's code a failed export's error passed through (a
    value from data used where a number is needed: ``torch.tensor([0, u2])``)."""
    cause = refusal.__cause__ if isinstance(refusal, ExportFailedError) else None
    frames = [f for f in traceback.extract_tb(cause.__traceback__) if is_user_file(f.filename)] \
        if cause is not None else []
    return [_Frame(frames[-1].filename, frames[-1].lineno)] if frames else []


@dataclass
class _Pins:
    """What the pinned export answers: reads, op sizes, and the sites it takes as they are."""

    reads: dict[str, Pin] = field(default_factory=dict)
    sizes: dict[str, SizePin] = field(default_factory=dict)
    sites: set[str] = field(default_factory=set)

    def add(self, sites: list, reads: dict[str, Pin], sizes: dict[str, SizePin],
            whole: bool = False) -> bool:
        """The recorded reads and op sizes in the headers of ``sites`` (``whole``: anywhere
        in their functions); whether any is new.
        A site of an op of data-dependent output size is taken as it is (Dynamo breaks
        there; torch.export traces it, its size pinned where example 0 recorded one; what
        it cannot trace it refuses, and verification judges the rest)."""
        before = (len(self.reads), len(self.sizes))
        for site in sites:
            lines = _span(site, whole)

            def here(loc: str, site=site, lines=lines) -> bool:
                filename, line = loc.rsplit(":", 1)
                return filename == site.filename and int(line) in lines

            # a read at the site, or in a helper the site's line called
            found = {loc: pin for loc, pin in reads.items()
                     if here(loc) or any(here(c) for c in pin.callers)}
            self.reads.update(found)
            self.sizes.update({loc: pin for loc, pin in sizes.items() if here(loc)})
            if found or site.kind in TAKEN_AS_THEY_ARE:
                self.sites.add(site.location)
        return (len(self.reads), len(self.sizes)) != before


def with_pins(refusal: StitchError, run: Callable, record: Callable, allow_guards: bool,
              tries: int = 4):
    """The program exported with the refused sites' reads and op sizes pinned
    (``allow_guards``); else the refusal, saying which reads could have been pinned."""
    sites = _sites(refusal)
    reads, sizes = record(_lines(sites))
    pins = _Pins()
    pins.add(sites, reads, sizes)
    if not pins.reads:  # the sizes at the sites come from reads elsewhere in their functions
        # (an interpolate to sizes a loop over `grid_thw.tolist()` read, left once the rest
        # of the function was rewritten)
        reads, sizes = record(_lines(sites, whole=True))
        pins.add(sites, reads, sizes, whole=True)
    if not pins.reads:  # nothing read into Python: the sizes come from elsewhere
        raise refusal
    if not allow_guards:
        refusal.args = (f"{refusal}\n{_hint(pins.reads)}",)
        raise refusal
    tried: list[str] = []
    for _ in range(tries):
        try:
            with pinned(pins.reads, frozenset(pins.sites)), pinned_sizes(pins.sizes):
                program = run()
        except REFUSALS as e:
            tried.append(gist(e))
            sites += _sites(e)
            reads, sizes = record(_lines(sites + _failed_at(e), whole=True))
            # the reads at the sites left; failing that, every read of their functions and
            # of the one the export stopped in (a read whose value reaches a size elsewhere)
            if not pins.add(sites, reads, sizes) and \
                    not pins.add(sites + _failed_at(e), reads, sizes, whole=True):
                break
            continue
        first = program.report.checks[0] if program.report.checks else None
        if first is not None and first.refused:
            tried.append("the pinned program refuses example 0 itself")
            break
        return _reported(program, pins)
    refusal.args = (f"{refusal}\nexported again with the reads at the sites left pinned to "
                    f"example 0's values ({', '.join(sorted(pins.reads))}): "
                    + "; then ".join(tried),)
    raise refusal


def _hint(pins: dict[str, Pin]) -> str:
    reads = ", ".join(f"`{p.call}` at {loc}" for loc, p in sorted(pins.items()))
    return (f"the program's shapes follow values the input holds ({reads}); "
            "stitch.Settings(allow_guards=True) pins those reads to example 0's values, "
            "with a check that raises SpecializationError for inputs holding others (one "
            "program per such value, e.g. per image grid)")


def _reported(program, pins: _Pins):
    decisions = tuple(
        Decision(Action.GUARD, loc, pin.function,
                 f"`{pin.call}` pinned to example 0's value {_value(pin)} (the program's "
                 "shapes follow it); inputs reading another value raise SpecializationError")
        for loc, pin in sorted(pins.reads.items()))
    decisions += tuple(
        Decision(Action.GUARD, loc, "",
                 f"the output size of {', '.join(sorted(pin.fixed))} pinned to the size "
                 "example 0 gave (the program's shapes follow it); inputs giving another "
                 "raise SpecializationError")
        for loc, pin in sorted(pins.sizes.items()) if pin.fixed)
    program.report = replace(program.report, decisions=(*program.report.decisions,
                                                        *decisions))
    return noted(program, f"{len(pins.reads)} scalar read(s) pinned to example 0's values "
                 "(Settings.allow_guards): the program is specialised to them")


def _value(pin: Pin) -> str:
    values = list(dict.fromkeys(repr(v) for _, v in pin.reads))
    text = values[0] if len(values) == 1 else " then ".join(values)
    return text if len(text) <= 60 else text[:57] + "..."
