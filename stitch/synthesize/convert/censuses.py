"""The censuses the rewrite rounds take: torch.compile of the (rewritten) model on every
example, with data-dependent capture turned on where torch.export's view of the model needs
it. A census is the largest part of an export's time; none is taken that cannot tell
anything new."""

from __future__ import annotations

import contextlib
import os
from dataclasses import replace

import torch

from capture import BreakKind, CaptureError, explain
from capture import torch_messages as tm
from capture.inputs import Example
from capture.sites import FoundBy
from capture.traced_breaks import names_traced_break

from ...plan import Action, Decision
from ..canonicalize.listed_folds import may_apply as folds_a_list
from ..operators.shims import shimmed

# breaks the rewrites address; side effects are handled by the epilogue at export time
REWRITTEN = {BreakKind.BRANCH, BreakKind.SCALAR_READ, BreakKind.ASSERT, BreakKind.LOOP}

# Dynamo's config flags for data-dependent shapes and scalar reads, which it names in its
# hint (tm.CAPTURE_CONFIG_HINT) when a cond branch holds one: the whole branch must be
# captured, so the round's census turns them on (torch.export does too)
CAPTURE_HINTS = ("capture_dynamic_output_shape_ops", "capture_scalar_outputs")


def census_of(work, inputs: list[Example], capture_shapes: bool = True,
              capture_scalars: bool = False, hints_fail: bool = False,
              timeline: bool = True):
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
    once: without the shapes captured it fails the same way (the caller turns them on).
    ``timeline=False``: no second compiled run for the timeline and flow (``explain``); the
    censuses of rewrite rounds read only the sites and the eager trace."""
    # torch.export traces nn.LSTM/GRU/RNN (aten.lstm & co) where Dynamo, by default, breaks
    with shimmed(), torch._dynamo.config.patch(allow_rnn=capture_shapes):
        captured = None  # how the census with capture failed, where it did
        if capture_shapes:
            try:
                # (scalars only ever turned on here: a caller may have turned them on)
                with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True,
                                                **({"capture_scalar_outputs": True}
                                                   if capture_scalars else {})):
                    return _census(work, inputs, timeline)
            except CaptureError as e:
                if names_traced_break(e) or (hints_fail and _needs_hints(e)):
                    # a break inside a branch stitch made a cond (an `if` in an unrolled
                    # loop's body): the round rewrites it (``_break_in_traced_branch``); the
                    # census without capture would stop at the op instead
                    raise
                if _captures_already(capture_scalars):
                    raise  # the census "without" would run as this one did, and fail alike
                captured = e
        try:
            return _census(work, inputs, timeline)
        except CaptureError as e:
            e.with_capture = captured  # for ``round_census``
            raise


def _captures_already(scalars: bool) -> bool:
    """Whether Dynamo's config outside ``census_of`` (a caller's patch: ``round_census``
    with data-dependent capture turned on) already captures what ``census_of`` turns on."""
    config = torch._dynamo.config
    return bool(config.capture_dynamic_output_shape_ops) and (
        not scalars or bool(config.capture_scalar_outputs))


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
                                   capture_scalars=scalars, timeline=False), census)
    known = {s.location for s in captured.sites}
    gone = [s for s in census.sites if s.kind in CAPTURABLE and s.location not in known
            and not folds_a_list(s)]
    # sites no census sees (found while torch.export or a cond traced) stay; so do the
    # scalar reads and branches torch.compile showed when this census captures scalar reads
    # (a read kept as a 0-d tensor serves conds and guards better than a symbolic number),
    # and a fold of a `.tolist()`: no break once captured, but the list's length is fixed
    # to the traced one, a guard its rewrite removes (listed_folds)
    traced = tuple(s for s in census.sites if s.location not in known and (
        s.found_by != FoundBy.DYNAMO or (scalars and s.kind in REWRITTEN)
        or folds_a_list(s)))
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


def _census(work, inputs: list[Example], timeline: bool = True):
    examples = [(e.args, e.kwargs) for e in inputs[1:]]
    try:
        return explain(work, inputs[0].args, inputs[0].kwargs, examples=examples,
                       timeline=timeline)
    except CaptureError as e:
        if not examples or getattr(e, "example", None) == 0:
            raise  # example 0 alone fails the same way
    return explain(work, inputs[0].args, inputs[0].kwargs, timeline=timeline)


def _needs_hints(error: BaseException) -> bool:
    """A torch.cond arm that Dynamo could not capture whole without data-dependent capture
    (it names the config flags in its hint)."""
    text = "".join(str(x) for x in (error, error.__cause__) if x is not None)
    return tm.matches(tm.HIGHER_ORDER_OP_ERROR, text) and tm.matches(tm.CAPTURE_CONFIG_HINT, text)


def round_census(work, inputs: list[Example], scalars: bool = False):
    """The census of the rewritten model, and whether it needed data-dependent capture
    turned on: it is taken again so when a torch.cond branch needs it (Longformer's global
    attention: ``nonzero``, ``.item()``). Where that census fails too, its error says it
    was needed (``capture_needed``)."""
    def run(hints_fail=False):
        return census_of(work, inputs, capture_scalars=scalars, hints_fail=hints_fail,
                         timeline=False)

    try:
        census = run(hints_fail=True)
    except Exception as e:  # noqa: BLE001 - re-raised unless the retry applies
        if not _needs_hints(e):
            raise
        met = getattr(e, "with_capture", None)
        if scalars and met is not None:
            # the census with capture turned on below would run as the one with scalars
            # captured did (both flags on), and fail alike: that failure stands
            met.capture_needed = True
            raise met from met.__cause__  # the arm's line, which the round rewrites
    else:
        # a scalar read the rewrite itself made (a float a cond carried, read back): torch.export
        # captures it, so the census does too
        if not any(tm.matches(tm.SCALAR_READ_NOT_CAPTURED, s.gb_type + s.reason)
                   and s.stopped_in.rsplit(":", 1)[0].endswith(f"{os.sep}rt_numbers.py")
                   for s in census.sites):
            return census, False
    with torch._dynamo.config.patch(**dict.fromkeys(CAPTURE_HINTS, True)):
        try:
            return run(), True
        except Exception as e:
            # needed even where it failed: the round's next census starts with it on
            # (``rounds._loop``), not without it to fail on the arm again
            with contextlib.suppress(AttributeError):  # an error that takes no attribute
                e.capture_needed = True
            raise
