"""Rewrite rounds: rewrite the functions holding break sites, install them, re-capture,
and repeat while the census finds new fixable sites (a rewrite can expose a break further
down: Longformer's flag becomes a tensor that reaches the attention's ``if``).

Each round rewrites the original source of every target function with everything known so
far (data-dependent lines, the side example 0 took). A round whose conds fail to trace is
tried again with those branches guarded; a break the failed trace names in code no example
ran (site ``T1``…) is added to the targets and the round tried again.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

import torch

from capture import BreakKind, BreakSite, CaptureError, explain
from capture import torch_messages as tm
from capture.dynamo_breaks import hop_failure
from capture.inputs import Example
from capture.isolation import model_copy, preserved_rng, silenced_output
from capture.sites import FoundBy
from capture.size_tests import SIZE_TEST_RULE
from capture.traced_breaks import break_named_by, cond_failed_at, names_traced_break

from ...errors import SpecializationError, StitchError
from ...plan import Action, Decision
from ...settings import Settings
from ..canonicalize.slice_bounds import implicit_read
from ..operators.rt_inplace import KeptLoop
from ..operators.rt_number_lists import NUMBER_LIST
from ..operators.rt_pins import pinned_sites
from ..operators.rt_segments import SEGMENTS
from ..operators.runtime import RUNS_IN_PYTHON
from ..operators.shims import shimmed
from .bounded_loop import UNROLLED
from .caller_frames import lift_callers, no_caller_rest, owned, rest_or_caller
from .functions import Target, find_target, installed
from .indexed_loop import INDEXED
from .nonzero_loop import may_apply
from .reached_helpers import reached_helpers
from .round_build import build_round, left
from .split_map import may_apply as splits_by_data
from .undisable import is_disabled_call, undisabled

# breaks the rewrites address; side effects are handled by the epilogue at export time
REWRITTEN = {BreakKind.BRANCH, BreakKind.SCALAR_READ, BreakKind.ASSERT, BreakKind.LOOP}


# a decision whose reason holds one of these keeps numbers read from tensors as numbers
# (torch.export reads them so): the round's census captures scalar reads
SCALARS_CAPTURED = (UNROLLED, INDEXED, SEGMENTS, NUMBER_LIST)


def rewritable(site: BreakSite) -> bool:
    """A site some rewrite may fix: of a kind the rewrites address, or a dynamic-shape break
    a pass recognises from its line (a loop over nonzero(), a split by ``.tolist()``)."""
    return site.kind in REWRITTEN or may_apply(site) or splits_by_data(site)


def rewrite_rounds(work, census, inputs: list[Example], settings: Settings,
                   kept_loops: dict[str, str] | None = None, reached: dict | None = None,
                   learnt: dict | None = None):
    """Rounds of rewrites until no fixable site is left. ``kept_loops``: rewritten loops
    that are to stay as written from the first round (file:line -> why; the export found
    them, ``loop_to_keep``). ``reached``: helpers runs of a failed rewrite showed reads
    reaching (``reached_helpers.py``), grown here where a round fails to run. ``learnt``:
    what the censuses of an earlier pass of the same export found (``"hinted"``: the first
    round whose census needed data-dependent capture; earlier rounds' sites, scalar reads
    among them, are still found as they were)."""
    targets: dict[tuple[str, int], Target] = {}
    rewrites: dict[tuple[str, int], tuple[Target, Any]] = {}
    decisions: list[Decision] = []
    handled = set(pinned_sites())  # locations already rewritten (or refused, or pinned)
    traced = 0  # breaks found in branches no example took (cond traces)
    expected: set[str] = set()  # conds with side effects: they break under torch.compile
    rounds = 0
    census, decisions, scalars = shapes_captured(work, census, inputs)
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
    reached = {} if reached is None else reached
    # a round's census that needed data-dependent capture turned on (a cond's arm reads a
    # scalar) starts every later round with it on: the rewrites only add conds
    learnt = {} if learnt is None else learnt
    for round_no in range(1, settings.max_rounds + 1):
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
            if site.rule == SIZE_TEST_RULE:
                dependent.setdefault(site.filename, set()).add(site.lineno)
        for filename, taken in _sides(census).items():
            sides[filename] = {**taken, **sides.get(filename, {})}
        fresh_lines = {(s.filename, s.lineno) for s in fresh
                       if s.kind == BreakKind.BRANCH and s.rule != SIZE_TEST_RULE}
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
                with installed(candidate):
                    new_census, needed = _round_census(
                        work, accepted, scalars or round_no >= learnt.get("hinted", 10**9))
                if needed:  # from this round on, in this pass and any later one
                    learnt["hinted"] = min(round_no, learnt.get("hinted", round_no))
            except Exception as e:  # noqa: BLE001 - a rewrite that fails to run is reported
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
                error = f"{type(e).__name__}: {first_lines(str(e), 4)}"
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
                                    round_no) for s in fresh]
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
    return rewrites, decisions, census, rounds, expected


# Dynamo's config flags for data-dependent shapes and scalar reads, which it names in its
# hint (tm.CAPTURE_CONFIG_HINT) when a cond branch holds one: the whole branch must be
# captured, so the round's census turns them on (torch.export does too)
CAPTURE_HINTS = ("capture_dynamic_output_shape_ops", "capture_scalar_outputs")


def census_of(work, inputs: list[Example], capture_shapes: bool = True,
              capture_scalars: bool = False, hints_fail: bool = False):
    """The census on every example; where torch.compile itself fails on a later example (a
    Dynamo internal error, e.g. on a format spec after a recompile), the census of example
    0 alone: verification still runs every example and forces the branch sides the census
    did not see.

    ``capture_shapes``: capture ops with data-dependent output shapes (nonzero,
    torch.where(mask), boolean indexing), as torch.export does, so the census stops where
    export would, at what uses the size (a branch on it, a loop over it), not at the op.
    Where Dynamo then fails outright (a guard on such a size it cannot turn into a break),
    the census is taken again without that capture: the op itself is the site. The first
    census of a model runs without it: that is what torch.compile shows its user.
    ``capture_scalars``: scalar reads captured too (``capture_scalar_outputs``), for a model
    whose ops read a tensor as a size (``torch.arange(seq_len)`` with ``seq_len`` a tensor:
    an ``.item()`` inside the op), as torch.export does. ``hints_fail``: a census that
    fails on a torch.cond arm asking for data-dependent capture (``_needs_hints``) raises at
    once: without the shapes captured it fails the same way (the caller turns them on)."""
    # torch.export traces nn.LSTM/GRU/RNN (aten.lstm & co) where Dynamo, by default, breaks
    with shimmed(), torch._dynamo.config.patch(allow_rnn=capture_shapes):
        if capture_shapes:
            try:
                # (scalars only ever turned on here: a caller may have turned them on)
                with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True,
                                                **({"capture_scalar_outputs": True}
                                                   if capture_scalars else {})):
                    return _census(work, inputs)
            except CaptureError as e:
                if names_traced_break(e) or (hints_fail and _needs_hints(e)):
                    # a break inside a branch stitch made a cond (an `if` in an unrolled
                    # loop's body): the round rewrites it (``_break_in_traced_branch``); the
                    # census without capture would stop at the op instead
                    raise
        return _census(work, inputs)


# kinds of break an op with a data-dependent output size shows as (also "graph break in
# loop" around one): torch.export captures the op itself
CAPTURABLE = (BreakKind.DYNAMIC_SHAPE, BreakKind.UNSUPPORTED_CALL)


def shapes_captured(work, census, inputs: list[Example]):
    """The census torch.export's view calls for: with data-dependent output shapes captured
    (``census_of``), plus a decision for each site that then is no break at all."""
    if not any(s.kind in CAPTURABLE for s in census.sites):
        return census, [], False
    # an op that reads a tensor as a Python number (arange/zeros sized by a tensor): torch
    # export captures that read, so this census does too
    scalars = any(tm.matches(tm.SCALAR_IN_OP, s.reason) for s in census.sites
                  if s.kind in CAPTURABLE)
    captured = _same_ids(census_of(work, inputs, capture_shapes=True,
                                   capture_scalars=scalars), census)
    known = {s.location for s in captured.sites}
    gone = [s for s in census.sites if s.kind in CAPTURABLE and s.location not in known]
    # sites no census sees (found while torch.export or a cond traced) stay; so do the
    # scalar reads and branches torch.compile showed when this census captures scalar reads
    # (a read kept as a 0-d tensor serves conds and guards better than a symbolic number)
    traced = tuple(s for s in census.sites if s.location not in known and (
        s.found_by != FoundBy.DYNAMO or (scalars and s.kind in REWRITTEN)))
    captured = replace(captured, sites=(*captured.sites, *traced))
    return captured, [_captured(s) for s in gone], scalars


def _captured(site) -> Decision:
    if tm.matches(tm.RNN_WRAP, site.gb_type + site.reason):  # an nn.LSTM/GRU/RNN call
        return Decision(Action.TRACED, site.location, site.function,
                        "torch.export traces the RNN module (aten.lstm/gru/rnn ops) where "
                        "Dynamo by default does not (torch._dynamo.config.allow_rnn=False); "
                        "no rewrite needed here", site.id)
    return Decision(Action.SYMBOLIC, site.location, site.function,
                    "torch.export captures this op, its output size symbolic (an unbacked "
                    "size); no rewrite needed here", site.id)


def _same_ids(captured, census):
    """``captured``'s sites named as ``census`` named them (a site both see keeps its id;
    one only ``captured`` sees gets the next free number), so one report never gives two
    sites one id."""
    ids = {s.location: s.id for s in census.sites}
    numbers = [int(s.id[1:]) for s in census.sites if s.id[:1] == "S" and s.id[1:].isdigit()]
    fresh = iter(range(max(numbers, default=0) + 1, 10**9))
    sites = tuple(replace(s, id=ids[s.location] if s.location in ids else f"S{next(fresh)}")
                  for s in captured.sites)
    return replace(captured, sites=sites)


def _census(work, inputs: list[Example]):
    examples = [(e.args, e.kwargs) for e in inputs[1:]]
    try:
        return explain(work, inputs[0].args, inputs[0].kwargs, examples=examples)
    except CaptureError as e:
        if not examples or getattr(e, "example", None) == 0:
            raise  # example 0 alone fails the same way
    return explain(work, inputs[0].args, inputs[0].kwargs)


def _needs_hints(error: BaseException) -> bool:
    """A torch.cond arm that Dynamo could not capture whole without data-dependent capture
    (it names the config flags in its hint)."""
    text = "".join(str(x) for x in (error, error.__cause__) if x is not None)
    return tm.matches(tm.HIGHER_ORDER_OP_ERROR, text) and tm.matches(tm.CAPTURE_CONFIG_HINT, text)


def _round_census(work, inputs: list[Example], scalars: bool = False):
    """The census of the rewritten model, and whether it needed data-dependent capture
    turned on: it is taken again so when a torch.cond branch needs it (Longformer's global
    attention: ``nonzero``, ``.item()``)."""
    def run(hints_fail=False):
        return census_of(work, inputs, capture_scalars=scalars, hints_fail=hints_fail)

    try:
        census = run(hints_fail=True)
    except Exception as e:  # noqa: BLE001 - re-raised unless the retry applies
        if not _needs_hints(e):
            raise
    else:
        # a scalar read the rewrite itself made (a float a cond carried, read back): torch.export
        # captures it, so the census does too
        if not any(tm.matches(tm.SCALAR_READ_NOT_CAPTURED, s.gb_type + s.reason)
                   and s.stopped_in.rsplit(":", 1)[0].endswith(f"{os.sep}rt_numbers.py")
                   for s in census.sites):
            return census, False
    with torch._dynamo.config.patch(**dict.fromkeys(CAPTURE_HINTS, True)):
        return run(), True


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
