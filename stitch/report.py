"""The report: sites found, how each was fixed, graphs before and after, what was verified."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

from tabulate import tabulate

from capture import BreakSite
from capture.census import short_location

from .plan import Action, Decision
from .verify import Check


@dataclass(frozen=True)
class Report:
    graphs_before: int | None  # None: not counted (torch.export took the model as written)
    breaks_before: int | None
    graphs_after: int  # graphs in the stitched program
    breaks_after: int
    sites: tuple[BreakSite, ...]
    decisions: tuple[Decision, ...]
    checks: tuple[Check, ...] = ()
    remaining: tuple[BreakSite, ...] = ()
    rounds: int = 0
    epilogue_entries: int = 0
    graph_ops: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    seconds: dict[str, float] = field(default_factory=dict)
    # each strategy tried, in order, and what came of it (strategies.py)
    strategies: tuple[str, ...] = ()

    @property
    def guards(self) -> tuple[str, ...]:
        """Each specialised branch as ``file:line: why`` (only with Settings.allow_guards):
        the program raises SpecializationError for inputs taking its other side."""
        return tuple(f"{d.location}: {d.reason}" for d in self.decisions
                     if d.action == Action.GUARD)

    def to_json(self) -> dict:
        return {
            "guards": list(self.guards),
            "graphs_before": self.graphs_before, "breaks_before": self.breaks_before,
            "graphs_after": self.graphs_after, "breaks_after": self.breaks_after,
            "sites": [s.to_json() for s in self.sites],
            "decisions": [d.to_json() for d in self.decisions],
            "checks": [c.__dict__ for c in self.checks],
            "remaining": [s.to_json() for s in self.remaining],
            "rounds": self.rounds, "epilogue_entries": self.epilogue_entries,
            "graph_ops": dict(self.graph_ops), "notes": list(self.notes),
            "seconds": dict(self.seconds), "strategies": list(self.strategies),
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2)

    def __str__(self) -> str:
        before = "not counted" if self.graphs_before is None else self.graphs_before
        breaks = "not counted" if self.breaks_before is None else self.breaks_before
        head = (f"graphs: {before} -> {self.graphs_after} "
                f"(breaks {breaks} -> {self.breaks_after}), "
                f"{self.rounds} rewrite round(s), {self.epilogue_entries} deferred call(s); "
                f"graph holds " + ", ".join(f"{k} x{v}" for k, v in self.graph_ops.items()))
        rows = [[d.site or "-", d.action.value, short_location(d.location), d.function, d.reason[:70]]
                for d in self.decisions]
        parts = [head, *([tabulate(rows, headers=["site", "fixed by", "where", "function",
                                                   "why"])] if rows else [])]
        if self.guards:
            parts.append("GUARDED (Settings.allow_guards): these inputs raise "
                         "SpecializationError:\n" + "\n".join(f"  {g}" for g in self.guards))
        if self.remaining:
            parts.append("not fixed:\n" + "\n".join(
                f"  {s.id} {s.kind.value} {short_location(s.location)} {s.function}: {s.gb_type}"
                for s in self.remaining))
        if self.checks:
            vrows = [[c.what, c.outputs, c.texts, f"{c.max_abs_error:.2e}", c.note]
                     for c in self.checks]
            parts.append("verified against eager:\n" + tabulate(
                vrows, headers=["run", "tensors", "text lines", "max abs err", "note"]))
        parts.extend(self.notes)
        if self.strategies:
            parts.append("strategies tried:\n" + "\n".join(f"  {s}" for s in self.strategies))
        return "\n".join(parts)


def noted(program, *notes: str):
    """The program, its report carrying ``notes`` too."""
    report = getattr(program, "report", None)
    if notes and report is not None:
        program.report = replace(report, notes=(*report.notes, *notes))
    return program
