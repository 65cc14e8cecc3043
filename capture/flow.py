"""The flow graph: fragments and the eager glue between them, with data-flow edges."""

from __future__ import annotations

import networkx as nx

from .census import Fragment, TimelineStep
from .recorder import Run


def build_flow(fragments: list[Fragment], timelines: list[tuple[TimelineStep, ...]],
               runs: list[Run]) -> nx.DiGraph:
    """Nodes ``F<i>`` (fragments) and ``glue@<file:line>`` (Python that ran between them).

    Edges carry ``kinds``: ``control`` (ran next, with the example indices) and ``data``
    (a tensor one fragment returned was an input of a later one; ``tensors`` counts them).
    """
    flow = nx.DiGraph()
    for f in fragments:
        flow.add_node(f"F{f.index}", kind="fragment", op_count=f.op_count,
                      ends_with_break=f.ends_with_break)
    for example, timeline in enumerate(timelines):
        previous = None
        for step in timeline:
            node = f"F{step.fragment}" if step.kind == "fragment" else _glue_node(step, flow)
            if previous is not None and previous != node:
                _add_edge(flow, previous, node, "control", example=example)
            previous = node
    for run in runs:
        produced: dict[int, int] = {}
        for call in run.calls:
            for tid in call.input_ids:
                source = produced.get(tid)
                if source is not None and source != call.fragment:
                    _add_edge(flow, f"F{source}", f"F{call.fragment}", "data")
            for tid in call.output_ids:
                produced[tid] = call.fragment
    return flow


def _glue_node(step: TimelineStep, flow: nx.DiGraph) -> str:
    node = f"glue@{step.lines[0]}" if step.lines else "glue@?"
    if node not in flow:
        flow.add_node(node, kind="glue", lines=set(), sites=set())
    flow.nodes[node]["lines"].update(step.lines)
    flow.nodes[node]["sites"].update(step.sites)
    return node


def _add_edge(flow: nx.DiGraph, a: str, b: str, kind: str, example: int | None = None) -> None:
    if not flow.has_edge(a, b):
        flow.add_edge(a, b, kinds=set(), examples=set(), tensors=0)
    data = flow.edges[a, b]
    data["kinds"].add(kind)
    if example is not None:
        data["examples"].add(example)
    if kind == "data":
        data["tensors"] += 1
