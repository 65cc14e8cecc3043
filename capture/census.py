"""The census: where, why and how a model breaks into several graphs."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import networkx as nx
import torch
from tabulate import tabulate

from .export_probe import ExportProbe
from .sites import BreakKind, BreakSite, FoundBy
from .tracer import Condition, Outcome


@dataclass(frozen=True)
class Fragment:
    """One FX graph Dynamo produced, and where it ran."""

    index: int
    op_count: int
    input_sources: tuple[str, ...]
    ends_with_break: bool
    break_reason: str
    code: str
    runs: dict[int, tuple[int, ...]]  # example index -> positions in its fragment order
    graph_module: torch.fx.GraphModule | None = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict:
        return {
            "index": self.index, "op_count": self.op_count,
            "input_sources": list(self.input_sources), "ends_with_break": self.ends_with_break,
            "break_reason": self.break_reason, "code": self.code,
            "runs": {str(k): list(v) for k, v in self.runs.items()},
        }


@dataclass(frozen=True)
class TimelineStep:
    """A fragment running, or the eager glue (source lines) that ran between fragments."""

    kind: str  # "fragment" | "glue"
    fragment: int | None = None
    lines: tuple[str, ...] = ()  # "file:line" in the order they ran (glue only)
    sites: tuple[str, ...] = ()  # ids of break sites among those lines

    def to_json(self) -> dict:
        return {"kind": self.kind, "fragment": self.fragment, "lines": list(self.lines),
                "sites": list(self.sites)}


@dataclass(frozen=True)
class ExampleTrace:
    """What happened for one example input."""

    index: int
    fragment_order: tuple[int, ...]
    timeline: tuple[TimelineStep, ...]
    outcomes: tuple[Outcome, ...]  # every condition in the site functions, in run order
    site_order: tuple[str, ...]  # break-site lines in the order they ran eagerly
    stdout: str
    warnings: tuple[str, ...]
    logs: tuple[str, ...] = ()

    def branches(self, conditions: dict[str, Condition]) -> list[tuple[str, str]]:
        """(condition location, taken) for data-dependent conditions, in run order."""
        return [(conditions[o.condition].location, o.taken) for o in self.outcomes
                if conditions[o.condition].data_dependent]

    def to_json(self) -> dict:
        return {
            "index": self.index, "fragment_order": list(self.fragment_order),
            "timeline": [s.to_json() for s in self.timeline],
            "outcomes": [{"condition": o.condition, "taken": o.taken} for o in self.outcomes],
            "site_order": list(self.site_order), "stdout": self.stdout,
            "warnings": list(self.warnings), "logs": list(self.logs),
        }


@dataclass(frozen=True)
class Census:
    """Result of ``stitch.explain``."""

    graph_count: int  # graphs Dynamo compiled, recompiles included (one per trip count ...)
    break_count: int  # breaks Dynamo took at the sites: the sum of their counts
    sites: tuple[BreakSite, ...]
    fragments: tuple[Fragment, ...]
    conditions: tuple[Condition, ...]
    examples: tuple[ExampleTrace, ...]
    flow: nx.DiGraph = field(repr=False, compare=False)
    library_breaks: int = 0  # breaks with no user frame (inside logging, etc.), folded in
    export_probe: ExportProbe | None = None  # None: the probe did not run (explain's keyword)
    torch_version: str = torch.__version__
    seconds: dict[str, float] = field(default_factory=dict)

    # -- queries -----------------------------------------------------------------------
    def by_kind(self, kind: BreakKind | str) -> list[BreakSite]:
        kind = BreakKind(kind)
        return [s for s in self.sites if s.kind == kind]

    def site_at(self, lineno: int, filename: str | None = None) -> BreakSite | None:
        for s in self.sites:
            if s.lineno == lineno and (filename is None or s.filename == filename):
                return s
        return None

    @property
    def condition_map(self) -> dict[str, Condition]:
        return {c.id: c for c in self.conditions}

    # -- output ------------------------------------------------------------------------
    def to_json(self) -> dict:
        return {
            "torch_version": self.torch_version,
            "graph_count": self.graph_count,
            "break_count": self.break_count,
            "library_breaks": self.library_breaks,
            "export_probe": self.export_probe.to_json() if self.export_probe else None,
            "sites": [s.to_json() for s in self.sites],
            "fragments": [f.to_json() for f in self.fragments],
            "conditions": [_condition_json(c) for c in self.conditions],
            "examples": [e.to_json() for e in self.examples],
            "flow": _flow_json(self.flow),
            "seconds": dict(self.seconds),
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2)

    def __str__(self) -> str:
        dynamo = [s for s in self.sites if s.found_by is not FoundBy.EXPORT]
        head = (f"graph breaks: {self.break_count} at {len(dynamo)} site(s) "
                f"({self.graph_count} graph(s) compiled), torch {self.torch_version}")
        export_only = len(self.sites) - len(dynamo)
        if export_only:
            head += f"; {export_only} more site(s) where only torch.export stops"
        rows = [
            [s.id, s.kind.value, short_location(s.location), s.function, _paths(s),
             f"{s.count} (export)" if s.found_by is FoundBy.EXPORT else s.count,
             _clip(s.source_line, 48)]
            for s in self.sites
        ]
        parts = [head]
        if rows:
            parts.append(tabulate(rows, headers=["site", "kind", "where", "function",
                                                 "module", "breaks", "source"]))
        if self.export_probe is not None:
            seconds = self.seconds.get("export_probe")
            parts.append(str(self.export_probe)
                         + (f" ({seconds:.2f} s)" if seconds is not None else ""))
        conditions = self.condition_map
        for ex in self.examples:
            branches = ", ".join(f"{short_location(loc)}→{taken}" for loc, taken in ex.branches(conditions))
            parts.append(f"example {ex.index}: fragments {list(ex.fragment_order)}"
                         + (f"; branches {branches}" if branches else ""))
        return "\n".join(parts)


def short_location(location: str) -> str:
    path, _, line = location.rpartition(":")
    parts = path.split(os.sep)
    return f"{os.sep.join(parts[-2:])}:{line}" if len(parts) > 2 else location


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _paths(site: BreakSite) -> str:
    if not site.module_paths:
        return "-"
    first = site.module_paths[0] or "<root>"
    more = len(site.module_paths) - 1
    return first + (f" (+{more})" if more else "")


def _condition_json(c: Condition) -> dict:
    return {"id": c.id, "kind": c.kind, "filename": c.filename, "lineno": c.lineno,
            "source_line": c.source_line, "data_dependent": c.data_dependent}


def _flow_json(flow: nx.DiGraph) -> dict:
    def clean(v):
        if isinstance(v, set | frozenset | tuple):
            return sorted(v) if isinstance(v, set | frozenset) else list(v)
        return v

    return {
        "nodes": [{"id": n, **{k: clean(v) for k, v in d.items()}}
                  for n, d in flow.nodes(data=True)],
        "edges": [{"source": a, "target": b, **{k: clean(v) for k, v in d.items()}}
                  for a, b, d in flow.edges(data=True)],
    }
