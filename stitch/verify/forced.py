"""Forced branches: verify each branch site on the side the examples did not take.

The exported graph's predicate for that site (found by its mark, at any depth) is replaced
by a constant; the rewritten Python runs eagerly with the same side forced (``RT.force``);
both are compared like an example. A site nested in another branch is forced together
with the sides that reach it.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable

import torch

from capture.inputs import Example
from capture.isolation import silenced_output

from ..epilogue import Epilogue, ListTargets
from ..epilogue.targets import current, is_shared
from ..lower.branch_constants import inline_branch_constants
from ..lower.dead_reads import drop_dead_constant_reads
from ..program import run_with_epilogue
from ..synthesize.functions import installed
from ..synthesize.runtime import RT
from ..synthesize.site_marks import BranchSite, strip_marks
from .state import attribute_readings, changed_attributes
from .verifier import Appends


def forced_runs(work, rewrites, marked: torch.nn.Module, sites: dict[str, BranchSite],
                 epilogue: Epilogue, inputs: list[Example], append_targets: list[str] = (),
                 rebound: list[str] = ()):
    """(site, side, eager_fn, graph_fn) for every side of a marked branch site (cond or
    where, at any depth) that the examples miss. ``marked`` is the exported module before
    its marks were stripped; a nested site is forced together with the sides of the
    branches around it, so that it runs. Each fn has ``appends``: where what it appends to
    list attributes can be read, and ``buffers()``: its module's buffers after the run (read
    once, last: the run's copy of the model is let go then)."""
    if not sites:
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
    for site, where in sites.items():
        for side in (True, False):
            if side in seen.get(site, set()):
                continue
            force = where.forcing(side)
            prior = {t: copy.copy(current(reference, t)) for t in rebound  # a dict: its
                     if not is_shared(t)}  # items, which the program's side then sets
            graph_fn = _graph_forced(marked, epilogue, force, append_targets, rebound, prior)
            graph_fn.within = ", ".join(f"{s} {'true' if v else 'false'}"
                                        for s, v in where.within)
            runs.append((site, side, _eager_forced(reference, rewrites, force, append_targets,
                                                   rebound), graph_fn))
    return runs


@contextlib.contextmanager
def _eager_branches(force: dict[str, bool] | None = None):
    old = (RT.eager_branches, RT.force)
    RT.eager_branches, RT.force = True, dict(force or {})
    try:
        yield
    finally:
        RT.eager_branches, RT.force = old


def _eager_forced(reference, rewrites, force: dict[str, bool], targets,
                  rebound=()) -> Callable:
    last = [reference]  # before a run, the copy it will make looks like the reference

    def run(*args, **kwargs):
        last[0] = model = copy.deepcopy(reference)
        before = attribute_readings(model)
        try:
            with installed(rewrites), _eager_branches(force):
                return model(*args, **kwargs)
        finally:  # what this side changed that no example showed (the program cannot)
            run.changed = changed_attributes(before, attribute_readings(model),
                                             {*targets, *rebound})
    def buffers():  # read last: the copy is let go, so forced runs hold one model at a time
        out = {k: v.detach() for k, v in last[0].named_buffers()}
        last[0] = reference
        return out

    run.appends = Appends.in_model(targets, lambda: last[0], rebound)
    run.buffers = buffers
    return run


def _graph_forced(marked: torch.nn.Module, epilogue: Epilogue, force: dict[str, bool],
                  targets, rebound=(), prior: dict | None = None) -> Callable:
    """The deployed graph with the forced sites' predicates constant: ``marked`` stripped
    as the program was (marks, then unused constant reads), on a copy. ``prior``: the
    values the model's attributes set by the epilogue hold before the call, as the eager
    side's copy holds them (state a branch sets keeps its old value where the branch does
    not run)."""
    sink = ListTargets(shared=True)  # as the program's verification run (pipeline)
    held: dict = {}  # the forced copy, made when run and let go once its buffers are read

    def run(*args, **kwargs):
        sink.values.update(prior or {})
        held["module"] = module = copy.deepcopy(marked)
        strip_marks(module, force)
        drop_dead_constant_reads(module)
        inline_branch_constants(module)  # as the deployed graph
        return run_with_epilogue(module, epilogue, args, kwargs, lists=sink)

    def buffers():
        module = held.pop("module")
        return {k.removeprefix("model."): v.detach() for k, v in module.named_buffers()}

    run.appends = Appends.in_sink(sink, list(targets), list(rebound))
    run.buffers = buffers
    return run
