"""Forced branches: verify each branch site on the side the examples did not take.

The exported graph's predicate for that site (found by its mark, at any depth) is replaced
by a constant; the reference is the model's own code with the same test replaced by that
side (``synthesize/analysis/origins.py``: the test is still evaluated), everything else as written.
Where a site is no one test of the model's source (a branch stitch built: a loop's count,
a flag, an inverted test), the reference is the rewritten Python run eagerly with the side
forced (``RT.force``), and the report says so. Both are compared like an example. A site nested in another branch is forced together
with the sides that reach it, unless an example takes those sides itself: the site is
then forced alone, on that example.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable

import torch

from capture.branch_asserts import contradicts
from capture.inputs import Example
from capture.isolation import model_copy, silenced_output

from ..epilogue import Epilogue, ListTargets
from ..epilogue.targets import current, is_shared
from ..lower.branch_constants import inline_branch_constants
from ..lower.dead_reads import drop_dead_constant_reads
from ..running import run_with_epilogue
from ..synthesize.analysis.origins import model_forced
from ..synthesize.convert.functions import compile_function, installed, parse_function
from ..synthesize.operators.runtime import RT
from ..synthesize.operators.site_marks import BranchSite, SiteCopy, site_copies, strip_marks
from .observe import Appends
from .state import attribute_readings, changed_attributes


def forced_runs(work, rewrites, marked: torch.nn.Module, sites: dict[str, BranchSite],
                 epilogue: Epilogue, inputs: list[Example], append_targets: list[str] = (),
                 rebound: list[str] = (), dead: list[str] | None = None):
    """(site, side, eager_fn, graph_fn) for every side of a marked branch site (cond or
    where, at any depth) that the examples miss. ``marked`` is the exported module before
    its marks were stripped; a nested site is forced together with the sides of the
    branches around it, so that it runs. Each fn has ``appends``: where what it appends to
    list attributes can be read, and ``buffers()``: its module's buffers after the run (read
    once, last: the run's copy of the model is let go then). ``dead`` receives the sides
    no input can run (``never_runs``), which are not forced."""
    if not sites:
        return []
    seen: dict[str, set[bool]] = {}
    each: list[dict[str, set[bool]]] = []  # per example: the sides each site took
    reference = model_copy(work)
    for ex in inputs:
        RT.outcomes = []
        with installed(rewrites), _eager_branches(), torch.no_grad(), silenced_output():
            with contextlib.suppress(Exception):
                model_copy(reference)(*ex.args, **ex.kwargs)
        each.append({})
        for site, taken in RT.outcomes:
            seen.setdefault(site, set()).add(taken)
            each[-1].setdefault(site, set()).add(taken)
    runs = []
    copies = site_copies(marked)
    for site, where in sites.items():
        for side in (True, False):
            if side in seen.get(site, set()):
                continue
            example = _reaching(each, where.within)
            force = where.forcing(side) if example is None else {site: side}
            if never_runs(copies.get(site, []), force, side):
                if dead is not None:
                    dead.append(f"{site} {_side(side)} (within "
                                f"{', '.join(f'{s} {_side(v)}' for s, v in where.within)})")
                continue
            runs.append(_run(reference, rewrites, marked, epilogue, copies, where, side, force,
                             example or 0, append_targets, rebound))
    return runs


def every_side_runs(work, rewrites, marked: torch.nn.Module, sites: dict[str, BranchSite],
                    epilogue: Epilogue, append_targets: list[str] = (),
                    rebound: list[str] = ()):
    """(site, side, eager_fn, graph_fn) for both sides of every marked site, each forced
    with the sides around it: run on an input cut to a size below a dynamic dimension's
    range (verify/size_probes.py), whose data may take neither side, so that a size test
    in either arm meets that size (``if x[:, 1].sum() > 0:`` then ``if x.shape[0] > 1:``:
    every cut to 1 row took the false side)."""
    if not sites:
        return []
    runs = []
    reference = model_copy(work)
    copies = site_copies(marked)
    for site, where in sites.items():
        for side in (True, False):
            force = where.forcing(side)
            if not never_runs(copies.get(site, []), force, side):
                runs.append(_run(reference, rewrites, marked, epilogue, copies, where, side,
                                 force, 0, append_targets, rebound))
    return runs


def _run(reference, rewrites, marked, epilogue, copies, where, side: bool,
         force: dict[str, bool], example: int, append_targets, rebound):
    prior = {t: copy.copy(current(reference, t)) for t in rebound  # a dict: its items,
             if not is_shared(t)}  # which the program's side then sets
    graph_fn = _graph_forced(marked, epilogue, force, append_targets, rebound, prior)
    graph_fn.within = ", ".join(f"{s} {'true' if v else 'false'}" for s, v in where.within)
    graph_fn.size_test = _size_test(copies.get(where.site, []), force)
    graph_fn.size_needs = size_needs(copies.get(where.site, []), force, side)
    graph_fn.example = example
    own = model_forced(rewrites, force, parse_function, compile_function)
    rewritten = _eager_forced(reference, rewrites, force, append_targets, rebound)
    rewritten.against, rewritten.why = "rewrite", "a branch stitch built"
    eager_fn = rewritten
    if own is not None:  # the rewrite stays the fallback (verifier._assumed_away)
        eager_fn = _eager_forced(reference, own, {}, append_targets, rebound)
        eager_fn.against, eager_fn.fallback = "model", rewritten
    return where.site, side, eager_fn, graph_fn


def _reaching(each: list[dict[str, set[bool]]], within: tuple) -> int | None:
    """The first example whose own run takes every side around a nested site (None: none
    does, or the site is not nested): forced there, only the site itself is forced, and
    it runs where the data brings it (an unrolled loop's iterations below the count, each
    a cond on ``i < n``: forcing that cond true too would run iterations past the data)."""
    if not within:
        return None
    return next((k for k, taken in enumerate(each)
                 if all(v in taken.get(s, set()) for s, v in within)), None)


def _reached(copies: list[SiteCopy], force: dict[str, bool]) -> list[SiteCopy]:
    """The copies that run under ``force``: those no forced branch around them keeps out
    (an enclosing branch not forced takes its own side, as the data says)."""
    return [c for c in copies if all(force.get(s, v) == v for s, v in c.chain)]


def _size_test(copies: list[SiteCopy], force: dict[str, bool]) -> str:
    """The site's test where it is a test of sizes in every copy forcing reaches ("" where
    data decides it): forced on an example whose sizes it contradicts, its arm (traced
    knowing the test holds) meets sizes no input gives it."""
    reached = _reached(copies, force)
    if not reached or any(c.truth is None for c in reached):
        return ""
    return " / ".join(dict.fromkeys(str(c.truth) for c in reached))


def size_needs(copies: list[SiteCopy], force: dict[str, bool], side: bool) -> tuple:
    """What sizes the forced run needs: for each copy of the site that runs whatever the
    data (every branch around it forced), what its forced side needs of sizes, where
    known. On an input whose sizes make one of them false, no input of those sizes takes
    that side, and the forced run is no evidence either way."""
    return tuple(c.needs[side] for c in copies
                 if c.needs[side] is not None and all(s in force and force[s] == v
                                                      for s, v in c.chain))


def _side(value: bool) -> str:
    return "true" if value else "false"


def never_runs(copies: list[SiteCopy], force: dict[str, bool], side: bool) -> bool:
    """Whether no input can run ``side`` of a site with the branches around it as
    ``force`` has them: in every copy of the site those sides reach, the enclosing arms'
    conditions decide its own test the other way (sizes: ``if n > 0`` inside the arm of an
    earlier ``if n > 0`` on the same ``n``, a continuation's copy of a test). Such a side is
    dead code in the graph; run on the examples' data it would meet sizes its arms
    contradict. Any copy whose tests are data, or not decided so: it can run."""
    import sympy

    reached = _reached(copies, force)
    for copy_ in reached:
        conditions = [t if v else sympy.Not(t)
                      for (_, v), t in zip(copy_.chain, copy_.conditions, strict=True)
                      if t is not None]
        if copy_.truth is None or copy_.env is None or not conditions or not contradicts(
                copy_.env, conditions, copy_.truth if side else sympy.Not(copy_.truth)):
            return False
    return bool(reached)


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
        last[0] = model = model_copy(reference)
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
        sink.values.update({t: copy.copy(v) for t, v in (prior or {}).items()})  # per run
        held["module"] = module = model_copy(marked)
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
