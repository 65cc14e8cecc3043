"""``stitch.export``: the whole pipeline, top to bottom.

    numbers     Python numbers the examples differ in are run-time inputs (0-d tensors read
                back as numbers); if that is refused, constants, the refusal naming them
                (number_inputs.py)
    state       Python state the forward changes (python_state.py); the examples run once
    as written  a forward that says nothing, changes no state and reads no data: torch.export
                of the model as written, verified (plain_export.as_written_first); if that is
                refused, on with the census, the attempt in the report's notes
    census      capture.explain on the model and every example
    plan        group fixable sites by the function that contains them
    synthesize  rewrite those functions (loop, scalar, assert, branch passes); install them;
                re-capture; repeat while new fixable sites appear (synthesize/convert/rounds.py)
    export      torch.export of the rewritten model, side effects recorded into the epilogue;
                size tests it decided become conds (rewrite_export.py, size_rewrite.py)
    verify      program vs eager on every example and on every branch site forced both ways
"""

from __future__ import annotations

import copy
import time
from dataclasses import replace
from typing import Any

import torch

from capture import CaptureError
from capture.inputs import Example, forward_of, normalize
from capture.isolation import (
    examples_kept,
    inputs_copy,
    model_copy,
    reset_examples,
    sharing,
)
from capture.quiet import quiet
from capture.reachable import preserved_slots, reachable_slots, restore
from capture.shared_weights import shared_or_copied
from capture.side_state import preserved_globals, user_modules
from capture.size_tests import guard_places

from .call_inputs import keyword_defaults
from .caught_errors import with_try_hint
from .epilogue import ListTargets
from .epilogue.targets import MEMOS, UNTAKEN, current, is_shared, know_lists, resolve_list
from .errors import (
    ExportFailedError,
    StitchError,
    UnfixableBreaksError,
    UnsupportedSideEffectError,
    VerificationError,
)
from .example_shapes import describe, shapes_from_examples, traced_first
from .exporting import Exported, graph_copy
from .findings import epilogue_decisions, graph_notes, hop_counts
from .first_runs import changes_state, deep_stack, register_containers, warm_up
from .first_use import with_first_use_hint
from .heap import older_objects_frozen
from .lower.bool_asserts import drop_misplaced_bool_asserts
from .lower.branch_constants import inline_branch_constants
from .lower.dead_reads import drop_dead_constant_reads
from .number_inputs import TAKEN, differing_numbers, graph_example, numbers_as_inputs
from .number_inputs import note as numbers_note
from .pinned_reads import REFUSALS, eager_reads, with_pins
from .plain_export import as_written, as_written_first, empty_census
from .probe_retry import eager_probes
from .program import PartialProgram, StitchedProgram, run_with_epilogue
from .progress import export_progress, export_seconds, stage
from .python_state import draw_entries, python_state_mutations
from .report import Report, noted
from .rewrite_export import Remaining, rewrite_and_export
from .running import scalar_leaves
from .settings import Settings
from .size_rewrite import finished
from .synthesize.convert.rounds import census_of
from .synthesize.operators.runtime import check_policy
from .synthesize.operators.shims import know_dead_draws
from .synthesize.operators.site_marks import read_marks, strip_marks
from .synthesize.operators.tracing_probes import bound_probes
from .verify import Appends, verify
from .verify.forced import every_side_runs, forced_runs
from .verify.program_start import ProgramStart
from .verify.size_probes import USER_SHAPES, size_checks, size_probes, with_guard_places


def export(model: Any, args: Any = (), kwargs: dict | None = None, *,
           examples: list | None = None, dynamic_shapes: Any = None, strict: bool = False,
           allow_partial: bool = False, settings: Settings | None = None) -> StitchedProgram:
    """ONE verified ``torch.export`` program for a model that breaks into several graphs."""
    settings = settings or Settings()
    # stitch runs the model on copies: the caller's inputs are never written into
    inputs = [inputs_copy(ex) for ex in normalize(model, args, kwargs, examples)]
    if not isinstance(model, torch.nn.Module):
        raise StitchError("stitch.export needs a torch.nn.Module; wrap the function in one")
    inferred = None if dynamic_shapes is not None else shapes_from_examples(model, inputs)
    # Python numbers that differ among the examples: run-time inputs of the program
    numbers = differing_numbers(model, inputs)
    # a dynamic dimension traced at size 1 would be fixed as a constant: trace another example
    inputs, traced = traced_first(model, inputs, dynamic_shapes or inferred)
    user_shapes = USER_SHAPES.set(dynamic_shapes is not None)
    seconds: dict[str, float] = {}  # each stage's time, over every attempt
    start = time.perf_counter()
    try:
        # each attempt, and verification, from these values; torch's messages: debug log only
        with examples_kept(inputs), quiet(settings.dump_dir), deep_stack(), \
                export_progress(seconds, settings.progress), older_objects_frozen():
            program = numbers_as_inputs(numbers, lambda: shared_or_copied(model, lambda: _export(
                model, inputs, dynamic_shapes or inferred, strict, allow_partial, settings)))
    finally:
        USER_SHAPES.reset(user_shapes)
    _timed(program, seconds, time.perf_counter() - start)
    return noted(program, *([f"dynamic dimensions read off the examples, which differ in "
                             f"them: {describe(inferred)}"] if inferred else []),
                 *([f"traced from examples[{traced - 1}]: the first example has size 0 or 1 "
                    "in a dynamic dimension, which torch.export would fix as a constant; "
                    "every example, the first included, was verified"] if traced else []),
                 *([numbers_note(taken)] if (taken := _numbers_taken(program)) else []))


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
        try:
            try:
                return _stitch(model, inputs, dynamic_shapes, strict, allow_partial,
                               settings, slots, initial)
            except REFUSALS as refusal:
                def again():
                    return _stitch(model, inputs, dynamic_shapes, strict, allow_partial,
                                   settings, slots, initial)

                try:  # traced, the model computes otherwise, or takes a path that fails?
                    return eager_probes(refusal, again, bound_probes(model))
                except REFUSALS as left:  # shapes that follow the input's values?
                    def reads(lines):
                        return eager_reads(model, inputs[0], initial, lines)

                    return with_pins(left, again, reads, settings.allow_guards)
        except (UnsupportedSideEffectError, VerificationError) as refusal:
            raise with_try_hint(with_first_use_hint(refusal, model, inputs),  # noqa: B904
                                model)  # the same error, with what the model catches
        finally:
            know_lists(None), know_dead_draws(())


def _list_at(model, target: str):
    """The list the epilogue appends to at ``target`` (a shared slot, or the user's model's
    attribute), or None where there is none."""
    try:
        return resolve_list(None if is_shared(target) else model, target)
    except StitchError:
        return None


def _unchecked_noted(program, unchecked: list[str]):
    """The report says which state the program never sets (declared scratch)."""
    return noted(program, *(
        f"{t!r} is changed by the forward on every call; declared scratch "
        "(Settings.unchecked_state): the program never sets it and it was not compared"
        for t in unchecked))


def _timed(program, seconds: dict[str, float], total: float) -> None:
    """The report's ``seconds``: each stage's time over every attempt, and the total."""
    report = getattr(program, "report", None)
    if report is not None:
        program.report = replace(report, seconds={
            **{k: round(v, 3) for k, v in seconds.items()}, "total": round(total, 3)})


def _stitch(model, inputs: list[Example], dynamic_shapes, strict: bool, allow_partial: bool,
            settings: Settings, slots: list, initial: list):
    reset_examples()  # a forward writing its input in place left it drifted
    work = model_copy(model)  # the user's model is never touched
    with stage("state"):  # first: nothing ran
        changes = python_state_mutations(work, inputs, strict, slots,
                                         tuple(settings.unchecked_state))
    compared = [s for s in slots  # declared scratch: not compared either
                if not {s.target, f"{s.owner}.{s.name}"} & set(changes.unchecked)]
    return _unchecked_noted(_stitch_work(model, work, changes, inputs, dynamic_shapes, strict,
                                         allow_partial, settings, compared,
                                         initial),
                            changes.unchecked)


def _stitch_work(model, work, changes, inputs: list[Example], dynamic_shapes, strict: bool,
                 allow_partial: bool, settings: Settings, slots: list,
                 initial: list):
    seconds = export_seconds()
    appends, tensors = changes.appends, changes.tensors
    know_lists(work, slots, appends)  # where appends in branches no example took go
    with stage("warm-up"):
        warm, first, silent = warm_up(work, inputs)
    registered = register_containers(warm)
    # Python numbers the forward returns: the program gives them back as numbers too; draws
    # from Python's or numpy's generator that change nothing: made again after the graph
    numbers = (scalar_leaves(first[0]) if first else (), draw_entries(changes))

    def finish(census):
        return lambda exported: _finish(
            model, exported.work, census, exported, inputs, dynamic_shapes, settings,
            registered, seconds, slots, tensors, changes.state_targets, initial, numbers)

    # torch.export alone may do: no census. Not under strict=True: Dynamo's trace drops a
    # data-dependent `assert` that the non-strict trace refuses (and the rewrites check)
    if silent and not strict and not changes_state(changes):
        program, left = as_written_first(work, inputs, dynamic_shapes, strict, settings,
                                         seconds, finish(None))
        if program is not None:
            return program
        tried = (f"tried first, before the census: torch.export of the model as written; "
                 f"left: {left}")
        try:
            return noted(_converted(model, work, changes, inputs, dynamic_shapes, strict,
                                    allow_partial, settings, seconds, finish), tried)
        except StitchError as refusal:
            refusal.add_note(tried)
            raise
    return _converted(model, work, changes, inputs, dynamic_shapes, strict, allow_partial,
                      settings, seconds, finish)


def _converted(model, work, changes, inputs: list[Example], dynamic_shapes, strict: bool,
               allow_partial: bool, settings: Settings, seconds: dict, finish):
    """The census, the rewrites and torch.export of the rewritten model; torch.export of
    the model as written where they are refused; the partial program on request."""
    appends = changes.appends
    try:
        with stage("census"):  # what torch.compile shows
            census = census_of(work, inputs, capture_shapes=False)
    except CaptureError as failed:  # torch.compile itself failed on the model
        plain = as_written(model, empty_census(), inputs, dynamic_shapes, strict, changes,
                           failed, finish(empty_census()))
        if plain is None:
            raise
        return plain
    try:
        rewritten = rewrite_and_export(work, census, inputs, dynamic_shapes, strict,
                                       settings, appends, seconds, changes.rebinds,
                                       changes.counters, changes.items)
        return finished(rewritten, finish(census))
    except (UnfixableBreaksError, ExportFailedError, VerificationError) as refusal:
        # never worse than torch.export: the model as written, if that verifies
        plain = as_written(model, census, inputs, dynamic_shapes, strict, changes,
                           refusal, finish(census))
        if plain is not None:
            return plain
        left_over = getattr(refusal, "partial", None)
        if allow_partial and left_over is not None:
            return _partial(model, work, census, left_over, inputs, settings, seconds)
        raise


def _finish(model, work, census, exported: Exported, inputs: list[Example], dynamic_shapes,
            settings: Settings, registered: list[str], seconds: dict,
            slots: list, tensors: list[str] = (), rebound=(),
            initial: list = (), numbers: tuple = ((), ())) -> StitchedProgram:
    """Verify the exported program against the model and build its report. ``rebound``:
    the state the forward sets on every call (python_state), compared whether or not the
    epilogue sets it. ``initial``: the slots as the user had them (``reachable.snapshot``),
    put back before verification runs: state left by the analysis's own runs (a global
    already holding what example 0 sets) would hide a set the program drops."""
    scalars, draws = numbers
    counted = census is not None  # None: exported as written before any census
    census = census if counted else empty_census()
    ep, rewrites = exported.ep, exported.rewrites
    taken = TAKEN.get()  # numbers the graph takes as 0-d tensors: the epilogue says so
    epilogue = replace(exported.epilogue, scalars=scalars, number_inputs=taken,
                       entries=(*exported.epilogue.entries, *draws))
    decisions = list(exported.decisions)
    # state only untaken paths change, that no branch of this program changes either, is
    # left alone by both: compared like any other attribute, not as replayed state
    replayed = {e.options.get("target") for e in epilogue.entries}
    rebound = [t for t in rebound if t not in UNTAKEN or t in replayed]
    t0 = time.perf_counter()
    drop_misplaced_bool_asserts(ep.graph_module)  # torch's, checking another node
    # keeps its branch marks: forced runs copy it (no marks, nothing to force: no copy)
    marked = graph_copy(ep.module()) if read_marks(ep.graph_module) else None
    sites = read_marks(marked) if marked is not None else {}
    strip_marks(ep.graph_module)  # the deployed graph has none
    dead_reads = drop_dead_constant_reads(ep.graph_module)  # before verification covers it
    inlined = inline_branch_constants(ep.graph_module)  # lets AOTInductor take the branches
    seconds["export"] = seconds.get("export", 0.0) + time.perf_counter() - t0
    program = StitchedProgram(ep, epilogue, examples=[graph_example(taken, ex) for ex in inputs],
                              dynamic_shapes=dynamic_shapes,
                              defaults=keyword_defaults(forward_of(model), ep))
    start = ProgramStart(program._module)  # each verification starts from it
    decisions += epilogue_decisions(census, epilogue)
    t0 = time.perf_counter()
    dead: list[str] = []
    forced = forced_runs(work, rewrites, marked, sites, epilogue, inputs,
                         epilogue.append_targets, list(rebound), dead) \
        if settings.force_branches else []
    probed = every_side_runs(work, rewrites, marked, sites, epilogue,  # on size probes
                             epilogue.append_targets, list(rebound)) \
        if settings.force_branches and not USER_SHAPES.get() and \
        any(size_probes(ep, ex) for ex in inputs) else []
    del marked
    def verified(examples, forced=(), forced_on=None, skip_refused=False):
        # verification runs mutate buffers: each starts from the program as exported
        check_module = start.fresh() if examples else program._module
        # the program's appends during verification, compared with eager's: lists outside
        # the model (class, global, closure) are the real ones, as a helper the epilogue
        # calls appends to them directly; the model's own lists go to the sink
        sink = ListTargets(shared=True)
        sink.values.update({t: copy.copy(current(model, t)) for t in epilogue.counter_targets
                            if not is_shared(t)})  # counters (and dicts) go on from the model's
        # Python state outside the model (class attributes, globals, closures) the model and
        # the program must leave alike; lists whose appends are deferred are compared as
        # appends
        restore(initial)  # from the user's state, as the model would run
        reset_examples()  # and from the examples' values as given
        appended = {id(v) for t in epilogue.append_targets  # also a model attribute
                    if (v := _list_at(model, t)) is not None}  # holding a global's list
        state = [s for s in slots if id(s.get()) not in appended]  # one list, maybe two names
        def program_call(*a, **k):  # a value where the graph holds a constant: refused
            program._constants.check(a, k)
            return run_with_epilogue(check_module, epilogue, a, k, lists=sink)

        return verify(model, program_call,
                      lambda: dict(check_module.named_buffers()), examples, settings, forced,
                      Appends.in_sink(sink, epilogue.append_targets, list(rebound)), state,
                      tensors, forced_on, skip_refused)

    try:
        checks = verified(inputs, forced)
    except VerificationError as e:  # a failed guard: where torch.export made its guards
        raise with_guard_places(e, guard_places(ep)) from e.__cause__
    sized, size_notes = size_checks(ep, inputs, lambda: restore(initial), verified,
                                    exported.widening, probed)
    checks += sized
    program.targets.bind(model)  # calling the program appends where the model's forward does
    seconds["verify"] = seconds.get("verify", 0.0) + time.perf_counter() - t0
    one_graph(ep)  # one graph by construction: checked on its structure, not re-traced
    start.put_back()
    program.report = Report(
        graphs_before=census.graph_count if counted else None,
        breaks_before=census.break_count if counted else None,
        graphs_after=1, breaks_after=0,  # one ExportedProgram: torch.export succeeded
        sites=census.sites, decisions=tuple(decisions), checks=tuple(checks),
        remaining=(), rounds=exported.rounds, epilogue_entries=len(epilogue),
        graph_ops=hop_counts(ep.graph_module),
        notes=(*graph_notes(forced, dead_reads, registered, inlined, dead),
               *(f"attribute {t!r} is set to a new tensor on every call (state the forward "
                 "keeps): the program keeps it as a buffer, starting from the model's value "
                 "and updated by each call as the model's attribute is (verified)"
                 for t in tensors),
               *(f"{t!r} is set on every call to a new value the forward computes and "
                 "never reads before setting (torch.export would drop it): the graph "
                 "returns its tensors and the epilogue sets it after each call (verified)"
                 for t in epilogue.rebind_targets if t not in MEMOS),
               *(f"{t!r} is a cache the forward reads and refills when it misses (on the "
                 "examples, calls from the cache as the model was given gave the outputs "
                 "and values of calls in sequence: capture/memo_state.py): the graph "
                 "recomputes it on every call and the epilogue sets it after each call as "
                 "eager leaves it (verified)" for t in epilogue.rebind_targets if t in MEMOS),
               *getattr(exported, "notes", ()), *size_notes,
               *dict.fromkeys(
                   f"{d.location}: the forward draws from {d.options['module']}."
                   f"{d.options['name']}, a number no output or text depends on (checked on "
                   "each example with the generator in two states): the epilogue makes the "
                   "same draw, so the generator advances as in eager" for d in draws)),
        seconds={k: round(v, 3) for k, v in seconds.items()},
    )
    program.model = model  # a reference, for stitch.compile's timing (it runs a copy)
    return program


def _partial(model, work, census, left_over: Remaining, inputs, settings, seconds):
    """allow_partial=True with breaks left: the rewritten model under torch.compile,
    verified against eager like a full program."""
    remaining = left_over.sites
    program = PartialProgram(copy.deepcopy(work), left_over.rewrites)
    t0 = time.perf_counter()
    checks = verify(model, program, lambda: dict(program._model.named_buffers()), inputs,
                    settings)
    seconds["verify"] = seconds.get("verify", 0.0) + time.perf_counter() - t0
    program._model.load_state_dict(work.state_dict())  # checks ran it: back to the start
    census_after = left_over.census_after
    program.report = Report(
        graphs_before=census.graph_count, breaks_before=census.break_count,
        graphs_after=census_after.graph_count, breaks_after=census_after.break_count,
        sites=census.sites, decisions=tuple(left_over.decisions), checks=tuple(checks),
        remaining=tuple(remaining), rounds=left_over.rounds,
        notes=(f"partial: {len(remaining)} break site(s) left (see 'not fixed'); the program "
               f"runs {census_after.graph_count} graph(s) under torch.compile instead of "
               f"{census.graph_count}; it is not an ExportedProgram and cannot be saved",),
        seconds={k: round(v, 3) for k, v in seconds.items()})
    return program


# -- after -------------------------------------------------------------------------------

def one_graph(ep: torch.export.ExportedProgram) -> None:
    """The program is one graph: its FX graph is well formed and calls no module (control
    flow is held by higher-order operators over its subgraphs). torch.export gave it, so a
    failure here is a bug in stitch's own graph edits, raised as one."""
    graph = ep.graph_module.graph
    graph.lint()
    modules = [n.format_node() for n in graph.nodes if n.op == "call_module"]
    if modules:
        raise AssertionError("stitch internal error: the exported program calls modules "
                             f"({modules[:3]}), so it is not one graph")
