"""Forced branches: verify each top-level cond on the side the examples did not take.

The exported graph's cond predicate is replaced by a constant; the rewritten Python runs
eagerly with the same side forced (``RT.force``); both are compared like an example.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable

import torch

from capture.inputs import Example
from capture.isolation import silenced_output

from ..epilogue import ListTargets
from ..errors import ExportFailedError
from ..program import StitchedProgram, run_with_epilogue
from ..synthesize.functions import installed
from ..synthesize.runtime import RT
from .verifier import Appends


def forced_runs(work, rewrites, program: StitchedProgram, cond_calls: list[str],
                 inputs: list[Example], append_targets: list[str] = ()):
    """(site, side, eager_fn, graph_fn) for every side of a top-level cond the examples miss.
    Each fn has ``appends``: where what it appends to list attributes can be read."""
    if not cond_calls:
        return []
    seen: dict[str, set[bool]] = {}
    reference = copy.deepcopy(work)
    for ex in inputs:
        RT.outcomes = []
        with installed(rewrites), _eager_branches(), torch.no_grad(), silenced_output():
            with contextlib.suppress(Exception):
                copy.deepcopy(reference)(*ex.args, **ex.kwargs)
        for site, taken in RT.outcomes:
            seen.setdefault(site, set()).add(taken)
    runs = []
    for site in dict.fromkeys(cond_calls):
        for side in (True, False):
            if side in seen.get(site, set()):
                continue
            runs.append((site, side,
                         _eager_forced(reference, rewrites, site, side, append_targets),
                         _graph_forced(program, cond_calls, site, side, append_targets)))
    return runs


@contextlib.contextmanager
def _eager_branches(force: dict[str, bool] | None = None):
    old = (RT.eager_branches, RT.force)
    RT.eager_branches, RT.force = True, dict(force or {})
    try:
        yield
    finally:
        RT.eager_branches, RT.force = old


def _eager_forced(reference, rewrites, site: str, side: bool, targets) -> Callable:
    last = [reference]  # before a run, the copy it will make looks like the reference

    def run(*args, **kwargs):
        last[0] = model = copy.deepcopy(reference)
        with installed(rewrites), _eager_branches({site: side}):
            return model(*args, **kwargs)
    run.appends = Appends.in_model(targets, lambda: last[0])
    return run


def _graph_forced(program: StitchedProgram, cond_calls: list[str], site: str,
                  side: bool, targets) -> Callable:
    module = copy.deepcopy(program._module)
    graph = module.graph
    conds = [n for n in graph.nodes
             if n.op == "call_function" and n.target is torch.ops.higher_order.cond]
    if len(conds) != len(cond_calls):
        raise ExportFailedError(
            f"expected {len(cond_calls)} top-level cond nodes (one per traced call), found "
            f"{len(conds)}; cannot force branches for verification")
    for node, label in zip(conds, cond_calls, strict=True):
        if label == site:
            with graph.inserting_before(node):
                const = graph.call_function(torch.full, ((), side), {"dtype": torch.bool})
            node.args = (const, *node.args[1:])
    module.recompile()

    sink = ListTargets()

    def run(*args, **kwargs):
        return run_with_epilogue(module, program.epilogue, args, kwargs, lists=sink)
    run.appends = Appends(list(targets), lambda: sink.lists)
    return run
