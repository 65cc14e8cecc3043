"""No surprises on sizes: a test on an input's size torch.export decided is rewritten.

An exported program whose dynamic dimension carries a guard from a Python test on its size
(``if x.shape[0] > 4:``, capture/size_tests.py) raises on sizes the model accepts. stitch
exports again with each such test rewritten, in this order:

1. a cond on the size: both arms in the graph, the size as the predicate;
2. where that program is not kept (its export or its widening fails), one arm
   (synthesize/convert/one_arm.py): the arm of an ``if`` that most sizes take runs at
   every size, with no guard (padding to a multiple by zero, cropping nothing), which keeps
   what later ops know of the size (a padded length's divisibility, which a cond's
   output size loses). Not where the cond's program is kept and still refuses some
   sizes: one arm is a nested export pass of its own, and where the sizes left are
   refused by guards of torch's own ops (the padded windows' one-window view in
   tests/stitch/test_contiguous_copies.py) it keeps them too, at twice the export time.

A rewrite's program is kept only when it accepts every size the first accepted and more
(verify/size_sides.py). It stands only if verification passes on the examples and on inputs
of the added sizes; where it does not, the first program stands, torch.export's guard and
the report's note with it, and the report says why the rewrite was not kept.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from capture import BreakKind
from capture.errors import gist
from capture.inputs import Example
from capture.size_tests import ONE_ARM_RULE, size_test_sites, special_side_lines

from .errors import StitchError, VerificationError
from .plan import Action
from .report import noted
from .verify.size_probes import USER_SHAPES
from .verify.size_sides import widening


def widened(exported, again: Callable, model, example: Example, known: set[str],
            index: int):
    """``exported``, or the program ``again(sites, left_out)`` exports with the size tests
    it was guarded on rewritten, where that one accepts more sizes (it then keeps what to
    try should it fail verification as its ``fallback``, ``exported`` last). ``left_out``:
    the locations of the tests this pass leaves out (their rewrite failed, or is being left
    out to find the one that did); a pass nested in ``again`` does not try them again."""
    if USER_SHAPES.get():  # the user's own Dims say which sizes the program serves
        return exported
    sites = size_test_sites(exported.ep, known, index)
    if not sites:
        return exported
    cond, left = _as_cond(exported, again, model, example, sites)
    if cond.widening is not None and not left:
        return cond
    # the cond kept nothing, or left tests out (a padded length whose divisibility the
    # cond's arms lose fails an assert or a view after it): one arm too, and the program
    # that accepts more of the sizes tried, the other its fallback
    single = _one_arm(exported, again, model, example, sites)
    if single is None:
        return cond
    if cond.widening is None or _accepted(single.widening) > _accepted(cond.widening):
        return replace(single, fallback=cond)
    return replace(cond, fallback=replace(single, fallback=cond.fallback))


def _accepted(widening) -> int:
    """How many of the sizes tried a widening added."""
    return sum(len(sizes) for sizes in widening.added.values())


def _one_arm(exported, again: Callable, model, example: Example, sites):
    """The program with each ``if`` (or conditional expression) among ``sites`` whose
    examples took the side fewer sizes take taken on the other side at every size (the
    other tests as conds on the size), where it exports and accepts more sizes; else
    None."""
    # an ``if`` or a conditional expression assigned to a name, where the examples took the
    # side fewer sizes take: the examples then show the general arm serving that side
    special = special_side_lines(exported.ep)
    ifs = [s for s in sites if s.kind == BreakKind.BRANCH and s.location in special]
    if not ifs:
        return None
    try:
        candidate = again([replace(s, rule=ONE_ARM_RULE) if s in ifs else s for s in sites],
                          frozenset(), quick_only=True)
    except StitchError:
        return None
    why = widening(exported.ep, candidate.ep, model, example)
    if isinstance(why, str):
        return None
    added = "; ".join(f"{label}: {_spans(sizes, why.tried[label])}"
                      for label, sizes in why.added.items())
    return replace(candidate, widening=why, notes=(
        *candidate.notes,
        f"size tests at {_lines(ifs)}: torch.export decided them for the examples' sizes "
        "(the program would raise 'Guard failed' on the others); the arm most sizes take "
        "runs at every size, with no guard (what it prints, logs or warns stays under "
        f"the test), and the program also accepts {added} "
        "(verified exact on the examples and on example 0 cut or repeated to the nearest "
        "added sizes: see the checks)"))


def _as_cond(exported, again: Callable, model, example: Example, sites):
    """``exported``, or the program with ``sites`` rewritten into conds on the size where
    it accepts more sizes (``exported`` its fallback); and the sites whose own rewrite
    failed to export, left out of it."""
    lines = _lines(sites)
    left: list[str] = []  # tests whose own rewrite failed to export, kept as guards
    every = sites
    none_kept = [s.location for s in sites]

    def tried(some):
        return again(some, frozenset(s.location for s in every if s not in some))

    while True:
        try:
            candidate = tried(sites)
            break
        except StitchError as e:
            failed = _failed_at(e, sites)
            if len(sites) == 1:
                return _kept(exported, lines, f"exporting it failed: {gist(e, 700)}"), none_kept
            if failed is None:
                # the error names no site (a break inside a rewritten test's arm): each
                # site left out in turn, the first set that exports serves
                found = _without_one(tried, sites)
                if found is None:
                    return _kept(exported, lines, f"exporting it failed: {gist(e, 700)}"), none_kept
                failed, candidate = found
                sites = [s for s in sites if s is not failed]
                left.append(_left_note(failed, e))
                break
            # one test's rewrite fails where the others' export: the others still serve
            # their sides (a test on a size equal to a constant, whose arm only traces for
            # that constant, beside a padding test)
            sites = [s for s in sites if s is not failed]
            left.append(_left_note(failed, e))
    why = widening(exported.ep, candidate.ep, model, example)
    if isinstance(why, str):
        return _kept(exported, lines, why), none_kept
    lines = _lines(sites)
    added = "; ".join(f"{label}: {_spans(sizes, why.tried[label])}"
                      for label, sizes in why.added.items())
    return replace(candidate, fallback=exported, widening=why, notes=(
        *candidate.notes, *(f"size test at {note}" for note in left),
        f"size tests at {lines}: torch.export decided them for the examples' sizes (the "
        f"program would raise 'Guard failed' on the others); rewritten as torch.cond on the "
        f"size (a loop it counts: torch.while_loop), the program also accepts {added} "
        "(verified on example 0 cut or repeated to the nearest added sizes: see the "
        "checks)")), [s.location for s in every if s not in sites]


def finished(exported, finish: Callable):
    """``finish(exported)`` (verification, the report); where a size-test rewrite fails
    verification, ``finished`` of what it keeps to try next (``fallback``), with the
    reason noted."""
    fallback = getattr(exported, "fallback", None)
    try:
        return finish(exported)
    except VerificationError as e:
        if fallback is None:
            tried = [n for n in getattr(exported, "notes", ()) if _NOT_KEPT in n]
            if tried:  # the guard that failed is one a rewrite was tried for: say why not
                raise type(e)("\n".join([str(e), *tried])) from e.__cause__
            raise
        first = e
    why = str(first).split("\n", 1)[0][:300]
    try:
        program = finished(fallback, finish)
    except VerificationError:  # none verifies: the rewrite's reason is the one to read
        raise first from None
    one_arm = any(d.action == Action.ONE_ARM for d in exported.decisions)
    what = "the arm most sizes take, at every size" if one_arm else "torch.cond"
    then = ("their other rewrite was tried next (see the other notes on sizes)"
            if fallback.widening is not None else "this program keeps torch.export's guard")
    return noted(program, f"the size tests' rewrite into {what} was not kept: its "
                          f"program failed verification ({why}); {then}")


def noted_first(exported, note: str):
    """``exported`` and each program it keeps to try next with ``note`` first in its
    notes."""
    fallback = exported.fallback
    return replace(exported, notes=(note, *exported.notes), fallback=None if fallback is None
                   else noted_first(fallback, note))


def _without_one(tried: Callable, sites):
    """(the site left out, the program) for the first of ``sites`` without which the rest
    export (at most ``_LEAVE_OUT`` tries: each is an export), or None."""
    for failed in sites[:_LEAVE_OUT]:
        try:
            return failed, tried([s for s in sites if s is not failed])
        except StitchError:
            continue
    return None


def _left_note(failed, error: StitchError) -> str:
    return (f"{_lines([failed])}: its rewrite failed to export ({gist(error)[:200]}), so it "
            "keeps torch.export's guard")


def _lines(sites) -> str:
    return ", ".join(f"{s.location} (`{s.source_line.strip()}`)" for s in sites)


def _failed_at(error: StitchError, sites):
    """The site whose line torch.export was tracing when ``error`` stopped it, if any."""
    where = getattr(error, "where", None)
    return next((s for s in sites if where == s.location), None)


_LEAVE_OUT = 4  # sites left out one at a time where a failed export names none of them
_NOT_KEPT = "a rewrite into torch.cond on the size was tried and not kept"


def _kept(exported, lines: str, why: str):
    return replace(exported, notes=(
        *exported.notes,
        f"size tests at {lines}: torch.export decided them for the examples' sizes; "
        f"{_NOT_KEPT} ({why}). What you can "
        "do: export one program per side, each from examples on that side"))


def _spans(sizes: list[int], largest: int) -> str:
    """[2, 3, 4, 7] -> "2-4, 7" (within the sizes tried, 2 to ``largest``)."""
    out: list[str] = []
    start = prev = sizes[0]
    for n in [*sizes[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(out) + f" (of 2-{largest} tried)"
