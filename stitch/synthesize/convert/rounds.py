"""Rewrite rounds: rewrite the functions holding break sites, install them, re-capture,
and repeat while the census finds new fixable sites (a rewrite can expose a break further
down: Longformer's flag becomes a tensor that reaches the attention's ``if``).

Each round rewrites the original source of every target function with everything known so
far (data-dependent lines, the side example 0 took). A round whose conds fail to trace is
tried again with those branches guarded; a break the failed trace names in code no example
ran (site ``T1``…) is added to the targets and the round tried again.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from capture import BreakKind, BreakSite
from capture import torch_messages as tm
from capture.dynamo_breaks import hop_failure
from capture.inputs import Example
from capture.isolation import model_copy, preserved_rng, silenced_output
from capture.size_tests import SIZE_RULES
from capture.traced_breaks import break_named_by, cond_failed_at

from ...errors import SpecializationError, StitchError
from ...plan import Action, Decision
from ...settings import Settings
from ..canonicalize.listed_folds import may_apply as folds_a_list
from ..canonicalize.slice_bounds import implicit_read
from ..operators.rt_inplace import KeptLoop
from ..operators.rt_number_calls import LISTED
from ..operators.rt_number_lists import NUMBER_LIST
from ..operators.rt_pins import pinned_sites
from ..operators.rt_segments import SEGMENTS
from ..operators.runtime import RUNS_IN_PYTHON
from .bounded_loop import UNROLLED
from .caller_frames import lift_callers, no_caller_rest, owned, rest_or_caller
from .censuses import REWRITTEN, round_census, shapes_captured
from .functions import Target, find_target, installed
from .indexed_loop import INDEXED
from .nonzero_loop import may_apply
from .reached_helpers import reached_helpers
from .round_build import build_round, failed_when_run, left
from .split_map import may_apply as splits_by_data
from .undisable import is_disabled_call, undisabled

# ``learnt`` keys: the first round of a pass is taken with no census of its rewrite
# (``UNCHECKED_FIRST``, the caller's request), and it was (``UNCHECKED_USED``): where the
# pass's torch.export then fails, the caller takes the pass again with every census
UNCHECKED_FIRST, UNCHECKED_USED = "unchecked_first", "unchecked_used"
CAPTURED = "captured"  # (the sites, ``shapes_captured``'s census and decisions of them)
# decisions a census of the rewrite must check: a guard's other side, a site left as it is
# (the census says whether its break is still there)
_CENSUS_DECIDES = (Action.GUARD, Action.LEFT)

# a decision whose reason holds one of these keeps numbers read from tensors as numbers
# (torch.export reads them so): the round's census captures scalar reads
SCALARS_CAPTURED = (UNROLLED, INDEXED, SEGMENTS, NUMBER_LIST, LISTED)


def rewritable(site: BreakSite) -> bool:
    """A site some rewrite may fix: of a kind the rewrites address, or a dynamic-shape break
    a pass recognises from its line (a loop over nonzero(), a split by ``.tolist()``, a fold
    of one)."""
    return site.kind in REWRITTEN or may_apply(site) or splits_by_data(site) \
        or folds_a_list(site)


def rewrite_rounds(work, census, inputs: list[Example], settings: Settings,
                   kept_loops: dict[str, str] | None = None, reached: dict | None = None,
                   learnt: dict | None = None):
    """Rounds of rewrites until no fixable site is left. ``kept_loops``: rewritten loops
    that are to stay as written from the first round (file:line -> why; the export found
    them, ``loop_to_keep``). ``reached``: helpers runs of a failed rewrite showed reads
    reaching (``reached_helpers.py``), grown here where a round fails to run. ``learnt``:
    what the censuses of an earlier pass of the same export found (``"hinted"``: the first
    round whose census needed data-dependent capture; earlier rounds' sites, scalar reads
    among them, are still found as they were; ``"resume"``: an earlier pass's rounds as they
    ended, and sites torch.export found after them: the rounds go on from there, the sites
    found in the next round, instead of starting again from the first; ``"unchecked"``
    beside it: that round without a census, its torch.export the only trace)."""
    learnt = {} if learnt is None else learnt
    learnt.pop("ended", None)
    resumed = learnt.pop("resume", None)
    if resumed is not None and resumed[0][_STATE.index("rounds")] < settings.max_rounds:
        return _rounds(work, inputs, settings, reached, learnt, *resumed)
    learnt.pop("unchecked", None)  # every round from the first: each with its census
    return _rounds(work, inputs, settings, reached, learnt, None, (), census, kept_loops)


# what a pass of the rounds has found when it ends, in order: a later pass resumes from it
_STATE = ("targets", "rewrites", "decisions", "handled", "traced", "expected", "rounds",
          "census", "kept_loops", "rest_lines", "rest_calls", "resumers", "dependent", "sides",
          "scalars")


def resumed_with(ended: dict, sites: tuple, quick: bool = False) -> dict:
    """``learnt`` for a later pass of the same export (tests on sizes torch.export decided)
    that goes on from the rounds as ``ended`` (an ended pass's ``learnt``) holds them,
    ``sites`` its next round's sites; the state copied, so each such pass (a leave-one-out
    try among them) starts from the same one. ``quick``:
    sites that are all tests on sizes are rewritten with no census of the result, its
    torch.export the only trace (the caller takes a pass with the census where that fails:
    a census finds what the rewrite exposes, torch.export stops at it)."""
    out = {key: ended[key] for key in ("hinted",) if key in ended}
    if quick:
        out["quick"] = True
    if "ended" in ended:
        out["resume"] = (_copied(ended["ended"]), tuple(sites))
    return out


def _copied(ended: tuple) -> tuple:
    """The rounds' state with each container it holds copied (a round adds to them)."""
    state = dict(zip(_STATE, ended, strict=True))
    state["targets"] = {key: replace(t, sites=list(t.sites))
                        for key, t in state["targets"].items()}
    for key in ("rewrites", "kept_loops", "rest_lines"):
        state[key] = dict(state[key])
    state["decisions"] = list(state["decisions"])
    for key in ("handled", "expected", "resumers"):
        state[key] = set(state[key])
    for key in ("rest_calls", "sides"):
        state[key] = {k: dict(v) for k, v in state[key].items()}
    state["dependent"] = {k: set(v) for k, v in state["dependent"].items()}
    return tuple(state[key] for key in _STATE)


def _rounds(work, inputs, settings, reached, learnt, state, new_sites, census=None,
            kept_loops=None):
    if state is not None:  # an earlier pass's, with the sites found since
        (targets, rewrites, decisions, handled, traced, expected, rounds, census, kept_loops,
         rest_lines, rest_calls, resumers, dependent, sides, scalars) = state
        census = replace(census, sites=(*census.sites, *new_sites))
        return _loop(work, inputs, settings, reached, learnt, rounds + 1, targets, rewrites,
                     decisions, handled, traced, expected, rounds, census, kept_loops,
                     rest_lines, rest_calls, resumers, dependent, sides, scalars)
    targets: dict[tuple[str, int], Target] = {}
    rewrites: dict[tuple[str, int], tuple[Target, Any]] = {}
    decisions: list[Decision] = []
    handled = set(pinned_sites())  # locations already rewritten (or refused, or pinned)
    traced = 0  # breaks found in branches no example took (cond traces)
    expected: set[str] = set()  # conds with side effects: they break under torch.compile
    rounds = 0
    # the census with data-dependent shapes captured: of the model as written, so a later
    # pass from the first round over the same sites takes it as the first pass did
    captured = learnt.get(CAPTURED)
    if captured is None or captured[0] != census.sites:
        captured = learnt[CAPTURED] = (census.sites, shapes_captured(work, census, inputs))
    census, decisions, scalars = captured[1]
    decisions = list(decisions)
    kept_loops = dict(kept_loops or {})  # rewritten loops left as written: file:line -> why
    # ifs whose cond failed (sides of different ranks or kinds): they take the rest of the
    # function into each arm on the next attempt; file:line -> torch's reason
    rest_lines: dict[str, str] = {}
    # ifs whose cond still failed with the rest of the function in each arm take the rest
    # of their callers, frame by frame (caller_continuation.py): target key -> line of the
    # call -> callee name; and the target keys of functions that return through it
    rest_calls: dict[tuple[str, int], dict[int, str]] = {}
    resumers: set[tuple[str, int]] = set()
    dependent: dict[str, set[int]] = {}  # file -> lines of data-dependent conditions
    sides: dict[str, dict[int, bool]] = {}  # file -> line -> the side example 0 took
    return _loop(work, inputs, settings, reached, learnt, 1, targets, rewrites, decisions,
                 handled, traced, expected, rounds, census, kept_loops, rest_lines, rest_calls,
                 resumers, dependent, sides, scalars)


def _loop(work, inputs, settings, reached, learnt, first, targets, rewrites, decisions,
          handled, traced, expected, rounds, census, kept_loops, rest_lines, rest_calls,
          resumers, dependent, sides, scalars):
    """The rounds from round ``first`` on, from the state the rounds before it left."""
    reached = {} if reached is None else reached
    # a round's census that needed data-dependent capture turned on (a cond's arm reads a
    # scalar) starts every later round with it on: the rewrites only add conds
    for round_no in range(first, settings.max_rounds + 1):
        fresh = [s for s in census.sites
                 if (rewritable(s) or is_disabled_call(s))
                 and s.location not in handled and s.stopped_in not in RUNS_IN_PYTHON]
        if round_no > 1:  # ids are per census: name sites found after a rewrite by their round
            fresh = [replace(s, id=f"R{round_no}.{s.id}") for s in fresh]
        if not fresh:
            break
        rounds = round_no
        # a tensor read as a slice bound becomes an explicit read (slice_bounds.py), which
        # the census then captures, as torch.export does
        scalars = scalars or any(implicit_read(s) for s in fresh)
        for site in fresh:
            handled.add(site.location)
            if is_disabled_call(site):  # the callee, unwrapped, becomes a target
                decisions.append(undisabled(site, work, targets, round_no))
                continue
            try:
                target = find_target(site, work)
            except StitchError as e:
                decisions.append(left(site, str(e), round_no))
                continue
            targets.setdefault(target.key, target).sites.append(site)
        # every round rewrites the original source: a condition found data-dependent in an
        # earlier round (a cond since, so no longer a Python `if` this census sees) stays so
        for filename, lines in _dependent_lines(census).items():
            dependent.setdefault(filename, set()).update(lines)
        for site in fresh:  # tests on sizes torch.export decided: a cond on the size
            if site.rule in SIZE_RULES:
                dependent.setdefault(site.filename, set()).add(site.lineno)
        for filename, taken in _sides(census).items():
            sides[filename] = {**taken, **sides.get(filename, {})}
        fresh_lines = {(s.filename, s.lineno) for s in fresh
                       if s.kind == BreakKind.BRANCH and s.rule not in SIZE_RULES}
        # no census of this round's rewrite, the pass's torch.export the only trace: size
        # tests (``resumed_with``), or the first round after torch.export found a site the
        # censuses did not (``unchecked``); where that export fails, the caller takes the
        # pass again with the census
        quick = (learnt.get("quick", False) and all(s.rule in SIZE_RULES for s in fresh)
                 or round_no == first and "unchecked" in learnt)
        guard_reason = ""
        attempt = 1
        while True:
            candidate, round_decisions, round_expected = build_round(
                targets, rewrites, dependent, sides, round_no,
                fresh_lines if attempt == 2 else set(), guard_reason, settings, kept_loops,
                rest_lines, (rest_calls, resumers), work, reached)
            # an unrolled loop's scalar reads stay numbers (bounded_loop): captured, as
            # torch.export captures them
            scalars = scalars or any(mark in d.reason for d in round_decisions
                                     for mark in SCALARS_CAPTURED)
            try:
                accepted = (_accepted(work, candidate, inputs)
                            if any(d.action == Action.GUARD for d in round_decisions)
                            else inputs)
                # the first round's rewrite with no census of it, where every site it took
                # became a rewrite (none guarded, none left): torch.export checks it
                unchecked = (not quick and round_no == 1 and learnt.get(UNCHECKED_FIRST, False)
                             and not any(d.action in _CENSUS_DECIDES
                                         for d in (*decisions, *round_decisions)))
                if unchecked:
                    learnt[UNCHECKED_USED] = True
                if quick or unchecked:
                    # the census the pass before exported from, the sites this round
                    # rewrites taken out
                    added = {(s.rule, s.location) for s in fresh}
                    new_census = replace(census, sites=tuple(
                        s for s in census.sites if (s.rule, s.location) not in added))
                    needed = False
                else:
                    with installed(candidate):
                        new_census, needed = round_census(
                            work, accepted,
                            scalars or round_no >= learnt.get("hinted", 10**9))
                if needed:  # from this round on, in this pass and any later one
                    learnt["hinted"] = min(round_no, learnt.get("hinted", round_no))
            except Exception as e:  # noqa: BLE001 - a rewrite that fails to run is reported
                if getattr(e, "capture_needed", False):  # as where that census succeeds
                    learnt["hinted"] = min(round_no, learnt.get("hinted", round_no))
                kept = loop_to_keep(e)
                if kept is not None and kept[0] not in kept_loops:  # that loop stays Python
                    kept_loops[kept[0]] = kept[1]
                    continue
                unseen = (_break_in_traced_branch(e, work, targets, handled, traced)
                          if attempt == 1 and traced < settings.max_traced_breaks
                          else None)
                if unseen is not None:  # rewrite it too, and try the conds again
                    traced += 1
                    fresh.append(unseen)
                    continue
                if reached_helpers(work, candidate, inputs[0], reached):
                    continue  # functions a read reaches by a call no name resolves
                error, advice = failed_when_run(e)
                failing = cond_failed_at(e) if attempt == 1 else None
                if failing is not None and rest_or_caller(
                        failing, round_decisions, rest_lines, work, targets, rest_calls,
                        resumers):
                    continue  # that if takes the rest of its function, or of its caller
                if attempt == 1 and fresh_lines:
                    guard_reason = (f"torch.cond over both branches failed to trace ({error})"
                                    + no_caller_rest(round_decisions))
                    attempt = 2
                    continue
                decisions += [left(s, f"the rewritten function failed when run: {error}",
                                    round_no, advice) for s in fresh]
                return rewrites, decisions, census, rounds, expected
            failed = failed_conds(new_census, round_decisions)
            untried = {loc: why for loc, why in failed if loc not in rest_lines}
            if untried and attempt == 1:  # first: the rest of the function in each arm
                rest_lines.update(untried)
                continue
            failing = [s for s in new_census.sites if s.location in dict(failed)]
            if failing and attempt == 1 and lift_callers(  # then: the rest of the caller
                    failing, rest_lines, work, targets, rest_calls, resumers):
                continue
            failed = [f"{loc}: {rest_lines[loc]}; with the rest of the function in each "
                      f"arm: {why}" if loc in rest_lines else f"{loc}: {why}"
                      for loc, why in failed]
            if failed and attempt == 1 and fresh_lines:  # as if the trace had raised
                guard_reason = (f"torch.cond over both branches failed to trace ({failed[0]})"
                                + no_caller_rest(round_decisions))
                attempt = 2
                continue
            census = new_census
            break
        rewrites = candidate
        rewritten_now = {d.function for d in round_decisions}
        decisions = [d for d in decisions
                     if d.action in (Action.LEFT, Action.SYMBOLIC, Action.TRACED)
                     or d.function not in rewritten_now]
        decisions += round_decisions
        expected |= round_expected
    # copies of what the caller adds to (its decisions on what is left)
    learnt["ended"] = (targets, dict(rewrites), list(decisions), set(handled), traced,
                       set(expected), rounds, census, kept_loops, rest_lines, rest_calls,
                       resumers, dependent, sides, scalars)
    return rewrites, decisions, census, rounds, expected


def _break_in_traced_branch(error, work, targets, handled: set[str], n: int):
    """A break site the failed cond trace names, added to the rewrite targets; or None.
    A census wraps the trace's error, its text cut short (the frames it names may stop at
    an outer cond: an unrolled loop's), so the innermost error's site not handled yet wins
    (the `if` in the loop's body)."""
    sites = []
    while error is not None:
        sites.append(break_named_by(error, "T", n + 1))
        error = error.__cause__
    site = next((s for s in reversed(sites) if s is not None and s.location not in handled),
                None)
    if site is None:
        return None
    site = owned(site, work)
    try:
        target = find_target(site, work)
    except StitchError:
        return None
    handled.add(site.location)
    targets.setdefault(target.key, target).sites.append(site)
    return site


def _accepted(work, candidate, inputs: list[Example]) -> list[Example]:
    """The examples a specialised (guarded) model still accepts; example 0 always is."""
    kept = [inputs[0]]
    for ex in inputs[1:]:
        try:
            with installed(candidate), torch.no_grad(), silenced_output(), preserved_rng():
                model_copy(work)(*ex.args, **ex.kwargs)
        except SpecializationError:
            continue
        except Exception:  # noqa: BLE001 - the census run reports it
            pass
        kept.append(ex)
    return kept


def loop_to_keep(error: BaseException | None) -> tuple[str, str] | None:
    """(file:line, why) of a rewritten loop that cannot run as rewritten (a loop over
    nonzero() of a mask that is not 1-D, an unrolled loop with no static bound), from a
    failed round's error chain."""
    while error is not None:
        if isinstance(error, KeptLoop):  # Dynamo appends the user frames it traced
            return error.location, tm.before(tm.USER_CODE_SECTION, str(error)).strip()
        error = error.__cause__ or error.__context__
    return None


def _sides(census) -> dict[str, dict[int, bool]]:
    """For each condition, the side example 0 took first (the side a guard keeps)."""
    out: dict[str, dict[int, bool]] = {}
    conditions = census.condition_map
    if not census.examples:
        return out
    for outcome in census.examples[0].outcomes:
        cond = conditions[outcome.condition]
        if cond.kind == "if" and outcome.taken in ("then", "else"):
            out.setdefault(cond.filename, {}).setdefault(cond.lineno, outcome.taken == "then")
    return out


def _dependent_lines(census) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for cond in census.conditions:
        if cond.data_dependent:
            out.setdefault(cond.filename, set()).add(cond.lineno)
    return out


def cond_failure(site: BreakSite) -> str | None:
    """torch's reason, when the break at ``site`` is a rewritten branch's torch.cond failing
    to trace (its arms give tensors of different ranks, say); else None."""
    return hop_failure(site.reason, "cond")


def failed_conds(census, decisions: list[Decision]) -> list[tuple[str, str]]:
    """(file:line, torch's reason) of the torch.cond failures this round's census shows at
    lines it made conds of."""
    made = {d.location for d in decisions if d.action == Action.COND}
    return [(s.location, why) for s in census.sites
            if s.location in made and (why := cond_failure(s)) is not None]


def first_lines(text: str, n: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[:n])
