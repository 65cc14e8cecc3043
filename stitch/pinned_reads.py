"""After a refusal, with ``Settings(allow_guards=True)``: export again with the scalar reads
at the sites left pinned to example 0's values, each checked in the graph
(synthesize/rt_pins.py). Without guards, the refusal says which reads could be pinned."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import torch

from capture import BreakKind
from capture.errors import gist
from capture.inputs import Example
from capture.isolation import model_copy, preserved_rng, silenced_output
from capture.reachable import restore
from capture.source import header_lines
from capture.traced_breaks import break_named_by

from .errors import ExportFailedError, StitchError, UnfixableBreaksError, VerificationError
from .plan import Action, Decision
from .report import noted
from .synthesize.rt_pins import Pin, pinned, recording

REFUSALS = (UnfixableBreaksError, ExportFailedError, VerificationError)


def eager_reads(model, example: Example, initial: list) -> dict[str, Pin]:
    """The scalar reads one eager run of example 0 makes, by file:line; the Python state the
    run changed is put back (``initial``, reachable.snapshot's)."""
    try:
        with recording() as found, preserved_rng(), silenced_output(), torch.no_grad():
            model_copy(model)(*example.args, **example.kwargs)
    except Exception:  # noqa: BLE001 - no reads to pin; the refusal stands as it was
        return {}
    finally:
        restore(initial)
    return found


def _sites(refusal: StitchError) -> list:
    """The break sites a refusal names: the sites left, or the one torch.export stopped at."""
    sites = list(getattr(refusal, "sites", ()))
    if isinstance(refusal, ExportFailedError):
        site = break_named_by(refusal.__cause__, "E", 1)
        sites += [site] if site is not None else []
    return sites


def reads_at(refusal: StitchError, recorded: dict[str, Pin]) -> tuple[dict[str, Pin], set[str]]:
    """The recorded reads in the headers of the refusal's sites, and the sites the pinned
    export takes as they are: those, and the ops of data-dependent output size left
    (``repeat_interleave`` by counts from the grid: Dynamo breaks there, torch.export
    traces them with a symbolic size, and verification judges the result)."""
    pins, sites = {}, set()
    for site in _sites(refusal):
        if site.kind == BreakKind.DYNAMIC_SHAPE:
            sites.add(site.location)
        lines = header_lines(site.filename, site.lineno)
        found = {loc: pin for loc, pin in recorded.items()
                 if loc.rsplit(":", 1)[0] == site.filename
                 and int(loc.rsplit(":", 1)[1]) in lines}
        if found:
            pins.update(found)
            sites.add(site.location)
    return pins, sites


def with_pins(refusal: StitchError, run: Callable, record: Callable[[], dict[str, Pin]],
              allow_guards: bool, tries: int = 4):
    """The program exported with the refused sites' reads pinned (``allow_guards``); else
    the refusal, saying which reads could have been pinned."""
    recorded = record()
    pins, sites = reads_at(refusal, recorded)
    if not pins:  # nothing to pin: the sizes come from elsewhere
        raise refusal
    if not allow_guards:
        refusal.args = (f"{refusal}\n{_hint(pins)}",)
        raise refusal
    tried: list[str] = []
    for _ in range(tries):
        try:
            with pinned(pins, frozenset(sites)):
                program = run()
        except REFUSALS as e:
            tried.append(gist(e))
            more, more_sites = reads_at(e, recorded)
            if not set(more) - set(pins):
                break
            pins.update(more)
            sites |= more_sites
            continue
        first = program.report.checks[0] if program.report.checks else None
        if first is not None and "refused by a guard" in first.note:
            tried.append("the pinned program refuses example 0 itself")
            break
        return _reported(program, pins)
    refusal.args = (f"{refusal}\nexported again with the reads at the sites left pinned to "
                    f"example 0's values ({', '.join(sorted(pins))}): "
                    + "; then ".join(tried),)
    raise refusal


def _hint(pins: dict[str, Pin]) -> str:
    reads = ", ".join(f"`{p.call}` at {loc}" for loc, p in sorted(pins.items()))
    return (f"the program's shapes follow values the input holds ({reads}); "
            "stitch.Settings(allow_guards=True) pins those reads to example 0's values, "
            "with a check that raises SpecializationError for inputs holding others (one "
            "program per such value, e.g. per image grid)")


def _reported(program, pins: dict[str, Pin]):
    decisions = tuple(
        Decision(Action.GUARD, loc, pin.function,
                 f"`{pin.call}` pinned to example 0's value {_value(pin)} (the program's "
                 "shapes follow it); inputs reading another value raise SpecializationError")
        for loc, pin in sorted(pins.items()))
    program.report = replace(program.report, decisions=(*program.report.decisions,
                                                        *decisions))
    return noted(program, f"{len(pins)} scalar read(s) pinned to example 0's values "
                 "(Settings.allow_guards): the program is specialised to them")


def _value(pin: Pin) -> str:
    values = list(dict.fromkeys(repr(v) for _, v in pin.reads))
    text = values[0] if len(values) == 1 else " then ".join(values)
    return text if len(text) <= 60 else text[:57] + "..."
