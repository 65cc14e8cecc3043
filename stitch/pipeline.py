"""``stitch.export``: the whole pipeline, top to bottom.

Before any strategy runs (``export``):
    numbers     Python numbers the examples differ in are run-time inputs (0-d tensors read
                back as numbers); if that is refused, constants, the refusal naming them
                (number_inputs.py)
    shapes      dynamic dimensions read off the examples; a size-1 first example traced
                second (example_shapes.py)

Each attempt prepares the model (``_prepared``): a copy of it, the Python state the forward
changes (python_state.py), one warm-up run of the examples. Then the strategies, in the
order of ``STRATEGIES`` (strategies.py runs them; the report lists each attempt):

    as written        torch.export of the model as written, before any census, for a forward
                      that says nothing, changes no state and reads no data (plain_export)
    converted         the Dynamo census; the converter rewrites the functions holding breaks,
                      round by round (synthesize/convert/rounds.py); torch.export of the
                      rewritten model, side effects recorded into the epilogue; size tests
                      torch.export decided become conds (rewrite_export.py)
    as written, after the converted program is refused: torch.export of the model as
                      written, never worse than torch.export (plain_export)
    tracing probes    the first three again with the model's is_compiling()-style probes answering
                      as in eager (probe_retry.py)
    reads pinned      the first three again with the refused sites' scalar reads pinned to example
                      0's values, on request (Settings.allow_guards; pinned_reads.py)
    partial           on request (allow_partial): the rewritten model under torch.compile

Every program a strategy exports is verified against the model before it is kept
(finish.py): on every example and on every branch site forced both ways.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.fx.experimental._config as fx_config

from capture import CaptureError
from capture import torch_messages as tm
from capture.errors import gist
from capture.inputs import Example, normalize
from capture.isolation import examples_kept, inputs_copy, model_copy, reset_examples, sharing
from capture.quiet import quiet
from capture.reachable import preserved_slots, reachable_slots
from capture.shared_weights import shared_or_copied
from capture.side_state import preserved_globals, user_modules

from .caught_errors import with_try_hint
from .epilogue.targets import know_lists
from .errors import (
    ExportFailedError,
    StitchError,
    UnfixableBreaksError,
    UnsupportedSideEffectError,
    VerificationError,
)
from .example_shapes import describe, shapes_from_examples, small_sizes, traced_first
from .finish import finish, partial_program
from .first_runs import changes_state, deep_stack, register_containers, warm_up
from .first_use import with_first_use_hint
from .heap import older_objects_frozen
from .number_inputs import differing_numbers, numbers_as_inputs
from .number_inputs import note as numbers_note
from .pinned_reads import REFUSALS, eager_reads, with_pins
from .plain_export import as_written, as_written_first, empty_census
from .probe_retry import eager_probes
from .program import StitchedProgram
from .progress import export_progress, export_seconds, stage
from .python_state import draw_entries, python_state_mutations
from .report import noted
from .rewrite_export import rewrite_and_export
from .running import scalar_leaves
from .settings import Settings
from .size_rewrite import finished
from .strategies import Left, Strategy, first_program, met_by_strategies
from .synthesize.convert.censuses import census_of
from .synthesize.convert.rounds import CAPTURED, UNCHECKED_FIRST, UNCHECKED_USED
from .synthesize.operators.runtime import check_policy
from .synthesize.operators.shims import know_dead_draws
from .synthesize.operators.tracing_probes import bound_probes
from .verify.size_probes import USER_SHAPES


def export(model: Any, args: Any = (), kwargs: dict | None = None, *,
           examples: list | None = None, dynamic_shapes: Any = None, strict: bool = False,
           allow_partial: bool = False, settings: Settings | None = None) -> StitchedProgram:
    """ONE verified ``torch.export`` program for a model that breaks into several graphs."""
    settings = settings or Settings()
    # stitch runs the model on copies: the caller's inputs are never written into
    inputs = [inputs_copy(ex) for ex in normalize(model, args, kwargs, examples)]
    if not isinstance(model, torch.nn.Module):
        raise StitchError("stitch.export needs a torch.nn.Module; wrap the function in one")
    _initialized(model)
    inferred = None if dynamic_shapes is not None else shapes_from_examples(model, inputs)
    # Python numbers that differ among the examples: run-time inputs of the program
    numbers = differing_numbers(model, inputs)
    # a dynamic dimension traced at size 1 would be fixed as a constant: trace another example
    inputs, traced = traced_first(model, inputs, dynamic_shapes or inferred)
    user_shapes = USER_SHAPES.set(dynamic_shapes is not None)
    seconds: dict[str, float] = {}  # each stage's time, over every attempt
    start = time.perf_counter()
    oblivious = ""  # the guard an example of size 0 or 1 failed, where exported again

    def exported():
        return numbers_as_inputs(numbers, lambda: shared_or_copied(model, lambda: _export(
            model, inputs, dynamic_shapes or inferred, strict, allow_partial, settings)))

    try:
        # each attempt, and verification, from these values; torch's messages: debug log only
        with examples_kept(inputs), quiet(settings.dump_dir), deep_stack(), \
                export_progress(seconds, settings.progress), older_objects_frozen():
            try:
                program = exported()
            except StitchError as e:
                small = small_sizes(model, inputs, inferred) if inferred is not None else set()
                failed = _small_size_guard(e, small) if small else None
                if failed is None:
                    raise
                # an example of size 0 or 1 failed a guard torch made on a size the others
                # have larger, maybe inside its own ops (a reshape's view, a broadcast) that
                # compute alike at 1: exported again reasoning about sizes obliviously
                # (no such guard), every example verified and cuts to 0 and 1 probed
                with fx_config.patch(backed_size_oblivious=True):
                    try:
                        program = exported()
                    except StitchError as again:
                        e.add_note("exported again reasoning about sizes obliviously (for "
                                   "the example of size 0 or 1), it was refused too: "
                                   f"{gist(again, 400)}")
                        raise e from None
                oblivious = str(failed.raised).split("\n", 1)[0][:160]
    finally:
        USER_SHAPES.reset(user_shapes)
    _timed(program, seconds, time.perf_counter() - start)
    return noted(program, *([f"sizes reasoned about obliviously: the program exported as "
                             f"torch.export makes it raised on an example of size 0 or 1 "
                             f"({oblivious}); exported again with torch's "
                             "backed_size_oblivious, which makes no guard on a size being 1 "
                             "inside torch's own ops, it was verified on every example"]
                           if oblivious else []),
                 *([f"dynamic dimensions read off the examples, which differ in "
                             f"them: {describe(inferred)}"] if inferred else []),
                 *([f"traced from examples[{traced - 1}]: the first example has size 0 or 1 "
                    "in a dynamic dimension, which torch.export would fix as a constant; "
                    "every example, the first included, was verified"] if traced else []),
                 *([numbers_note(taken)] if (taken := _numbers_taken(program)) else []))


def _initialized(model: torch.nn.Module) -> None:
    """A lazy module's parameters take their shapes, and their values, on its first call:
    stitch would make values the model does not have (it never changes the model)."""
    lazy = [n for n, t in (*model.named_parameters(), *model.named_buffers())
            if torch.nn.parameter.is_lazy(t)]
    if lazy:
        raise StitchError(
            f"the model has uninitialized parameters or buffers (lazy modules): "
            f"{', '.join(lazy[:6])}{' ...' if len(lazy) > 6 else ''}; their shapes and values "
            "are made on the model's first call, which stitch does not make for you (it never "
            "changes the model). Call the model once on an example, then export it.")


def _numbers_taken(program) -> tuple:
    epilogue = getattr(program, "epilogue", None)  # a partial program has none
    return epilogue.number_inputs if epilogue is not None else ()


def _export(model, inputs: list[Example], dynamic_shapes, strict: bool, allow_partial: bool,
            settings: Settings):
    know_lists(None)  # nothing registered by an earlier export counts as this model's state
    # analysis runs the forward many times: globals it mutates are put back afterwards
    slots = reachable_slots(model)  # class attributes, module globals, closure cells
    with preserved_globals(user_modules(model)), preserved_slots(slots) as initial, \
            check_policy(settings.checks), sharing(s.get() for s in slots):
        attempt = Attempt(model, inputs, dynamic_shapes, strict, allow_partial, settings,
                          slots, initial)
        try:
            return first_program(STRATEGIES, attempt)
        except (UnsupportedSideEffectError, VerificationError) as refusal:
            raise with_try_hint(with_first_use_hint(refusal, model, inputs),  # noqa: B904
                                model)  # the same error, with what the model catches
        finally:
            know_lists(None), know_dead_draws(())


@dataclass
class Prepared:
    """What one attempt knows before anything is traced: its copy of the model (the user's
    is never touched), the state the forward changes, the warm-up's findings."""

    work: Any
    changes: Any  # python_state.PythonState
    slots: list  # the Python state compared (declared scratch left out)
    registered: list[str]  # library containers registered as pytrees
    numbers: tuple  # (Python numbers the forward returns, draws that change nothing)
    seconds: dict
    silent: bool  # the examples ran, printing, logging and warning nothing


@dataclass
class Attempt:
    """One run of the strategies: the export's arguments, and what earlier strategies
    found (the census, the converted strategy's refusal)."""

    model: Any
    inputs: list[Example]
    dynamic_shapes: Any
    strict: bool
    allow_partial: bool
    settings: Settings
    slots: list
    initial: list  # the slots as the user had them (reachable.snapshot)
    prepared: Prepared | None = None
    census: Any = None
    refusal: StitchError | None = None  # the converted strategy's
    converted_work: Any = field(default=None, repr=False)

    def prepare(self) -> Prepared:
        if self.prepared is None:
            self.prepared = _prepared(self)
        return self.prepared

    def again(self, census=None):
        """The first strategies once more, from a fresh copy of the model (a strategy
        that runs them under a context: the probes answering as in eager, reads pinned);
        ``census``: this attempt's, where the context does not change what Dynamo sees."""
        fresh = Attempt(self.model, self.inputs, self.dynamic_shapes, self.strict,
                        self.allow_partial, self.settings, self.slots, self.initial,
                        census=census)
        return first_program(STRATEGIES[:3], fresh)

    def finisher(self, census):
        """Verification and the report for a program this attempt exported."""
        p = self.prepare()
        return lambda exported: finish(
            self.model, exported.work, census, exported, self.inputs, self.dynamic_shapes,
            self.settings, p.registered, p.seconds, p.slots, p.changes.tensors,
            p.changes.state_targets, self.initial, p.numbers)

    def kept(self, program):
        """The program, its report naming the state it never sets (declared scratch)."""
        return _unchecked_noted(program, self.prepare().changes.unchecked)


def _prepared(a: Attempt) -> Prepared:
    reset_examples()  # a forward writing its input in place left it drifted
    work = model_copy(a.model)  # the user's model is never touched
    with stage("state"):  # first: nothing ran
        changes = python_state_mutations(work, a.inputs, a.strict, a.slots,
                                         tuple(a.settings.unchecked_state))
    compared = [s for s in a.slots  # declared scratch: not compared either
                if not {s.target, f"{s.owner}.{s.name}"} & set(changes.unchecked)]
    seconds = export_seconds()
    know_lists(work, compared, changes.appends)  # where appends in branches no example took go
    if changes.first_calls is not None and not changes_state(changes):
        # the analysis's first calls made nothing lazily and found nothing: they serve
        warm, first, silent = _first_calls(changes.first_calls, len(a.inputs))
    else:
        with stage("warm-up"):
            warm, first, silent = warm_up(work, a.inputs)
    registered = register_containers(warm)
    # Python numbers the forward returns: the program gives them back as numbers too; draws
    # from Python's or numpy's generator that change nothing: made again after the graph
    numbers = (scalar_leaves(first[0]) if first else (), draw_entries(changes))
    return Prepared(work, changes, compared, registered, numbers, seconds, silent)


def _first_calls(calls: list, n: int):
    """``warm_up``'s findings from the state analysis's first calls of the ``n`` examples:
    every one returned, and none said anything (``changes_state``)."""
    return calls, (calls[1],) if calls else None, len(calls) == 2 * n


# -- the strategies ------------------------------------------------------------------------

def _quiet_and_stateless(a: Attempt) -> bool:
    """torch.export alone may do: no census. Not under strict=True: Dynamo's trace drops a
    data-dependent `assert` that the non-strict trace refuses (and the rewrites check)."""
    p = a.prepare()
    return p.silent and not a.strict and not changes_state(p.changes)


def _as_written_first(a: Attempt):
    p = a.prepare()
    program, left, met = as_written_first(p.work, a.inputs, a.dynamic_shapes, a.strict,
                                          a.settings, p.seconds, a.finisher(None))
    if program is None:
        raise Left(left, met)
    return a.kept(program)


def _converted(a: Attempt):
    p = a.prepare()
    a.converted_work = p.work
    if a.census is None:  # what torch.compile shows
        with stage("census"):
            a.census = census_of(p.work, a.inputs, capture_shapes=False)

    def converted(learnt: dict):
        rewritten = rewrite_and_export(
            p.work, a.census, a.inputs, a.dynamic_shapes, a.strict, a.settings,
            p.changes.appends, p.seconds, p.changes.rebinds, p.changes.counters,
            p.changes.items, learnt=learnt)
        return a.kept(finished(rewritten, a.finisher(a.census)))

    # the first round's rewrite is checked by torch.export and verification alone, no
    # census of it; where its program is refused, the rounds again, each with its census
    learnt = {UNCHECKED_FIRST: True}
    try:
        return converted(learnt)
    except StitchError:
        if not learnt.get(UNCHECKED_USED):
            raise
    return converted({k: learnt[k] for k in (CAPTURED,) if k in learnt})


def _as_written_after(a: Attempt):
    """Never worse than torch.export: the model as written, if that verifies (with no
    census where torch.compile itself failed on the model)."""
    census = a.census if a.census is not None else empty_census()
    program, left, met = as_written(a.model, census, a.inputs, a.dynamic_shapes, a.strict,
                                    a.prepare().changes, a.refusal, a.finisher(census))
    if program is None:
        raise Left(left, met)
    return a.kept(program)


def _refused(a: Attempt) -> bool:
    """The converted program was refused by torch.export, verification, or breaks left
    (not torch.compile failing on the model)."""
    return isinstance(a.refusal, REFUSALS)


def _probes(a: Attempt):
    return eager_probes(a.refusal, a.again, bound_probes(a.model))


def _pinned(a: Attempt):
    def reads(lines):
        return eager_reads(a.model, a.inputs[0], a.initial, lines)

    # Dynamo reads as always under the pins (they answer while torch.export traces): the
    # converted strategy's census stands
    return with_pins(a.refusal, lambda: a.again(a.census), reads, a.settings.allow_guards)


def _partial(a: Attempt):
    p = a.prepare()
    know_lists(a.converted_work, p.slots, p.changes.appends)  # as the converted attempt had
    return a.kept(partial_program(a.model, a.converted_work, a.census, a.refusal.partial,
                                  a.inputs, a.settings, p.seconds))


STRATEGIES = (
    Strategy("as written", "torch.export of the model as written, before any census",
             _as_written_first, when=_quiet_and_stateless, passes_on=(StitchError,)),
    Strategy("converted", "the census, the converter's rewrites, torch.export of the "
             "rewritten model", _converted, main=True,
             passes_on=(CaptureError, UnfixableBreaksError, ExportFailedError,
                        VerificationError)),
    Strategy("as written, after the converted program", "torch.export of the model as "
             "written, the census's sites noted", _as_written_after,
             when=lambda a: a.refusal is not None),
    Strategy("tracing probes as in eager", "the strategies above with the model's "
             "is_compiling()-style probes answering as in eager", _probes,
             when=lambda a: _refused(a) and bool(bound_probes(a.model)),
             passes_on=REFUSALS),
    Strategy("reads pinned", "the strategies above with the refused sites' scalar reads "
             "pinned to example 0's values (Settings.allow_guards; without it, the refusal "
             "names the reads)", _pinned, when=_refused, passes_on=REFUSALS),
    Strategy("partial", "the rewritten model under torch.compile, breaks left "
             "(allow_partial)", _partial, passes_on=(StitchError,),
             when=lambda a: a.allow_partial and getattr(a.refusal, "partial", None) is not None),
)


def _unchecked_noted(program, unchecked: list[str]):
    """The report says which state the program never sets (declared scratch)."""
    return noted(program, *(
        f"{t!r} is changed by the forward on every call; declared scratch "
        "(Settings.unchecked_state): the program never sets it and it was not compared"
        for t in unchecked))


def _small_size_guard(error: StitchError, small: set[str]) -> VerificationError | None:
    """The verification failure, among those the strategies met on the way to ``error``,
    where the program raised torch's ``Guard failed`` on one of the examples of size 0 or 1
    (``small``: their names), where the model returned: the model as written may verify
    under oblivious sizes although the converted strategy's refusal is the one raised. A
    guard failed on another example says nothing of sizes 0 and 1: no second export."""
    for met in met_by_strategies(error):
        if (isinstance(met, VerificationError) and isinstance(met.raised, AssertionError)
                and tm.matches(tm.GUARD_FAILED, str(met.raised))
                and str(met).split(":", 1)[0] in small):
            return met
    return None


def _timed(program, seconds: dict[str, float], total: float) -> None:
    """The report's ``seconds``: each stage's time over every attempt, and the total."""
    report = getattr(program, "report", None)
    if report is not None:
        program.report = replace(report, seconds={
            **{k: round(v, 3) for k, v in seconds.items()}, "total": round(total, 3)})
