"""The exported program verified against the model, and its report.

A strategy (pipeline.py) hands its exported program here: the graph cleaned of torch's
misplaced assertions and stitch's branch marks, then run against the model on every
example and on every branch site forced both ways, outputs, text, buffers and Python state
compared; the report says what was found, fixed and verified. A partial program (breaks
left, on request) is verified the same way.
"""

from __future__ import annotations

import copy
import time
from dataclasses import replace

import torch

from capture.inputs import Example, forward_of
from capture.isolation import reset_examples
from capture.reachable import restore
from capture.size_tests import guard_places

from .call_inputs import keyword_defaults
from .epilogue import ListTargets
from .epilogue.targets import MEMOS, UNTAKEN, current, is_shared, resolve_list
from .errors import StitchError, VerificationError
from .exporting import Exported, graph_copy
from .findings import epilogue_decisions, graph_notes, hop_counts
from .lower.bool_asserts import drop_misplaced_bool_asserts
from .lower.branch_constants import inline_branch_constants
from .lower.dead_reads import drop_dead_constant_reads
from .lower.sym_ops import numel_as_sizes, serializable_sym_ops
from .number_inputs import TAKEN, graph_example
from .plain_export import empty_census
from .program import PartialProgram, StitchedProgram, run_with_epilogue
from .report import Report
from .rewrite_export import Remaining
from .settings import Settings
from .synthesize.operators.rt_checks import referenced_messages
from .synthesize.operators.site_marks import read_marks, strip_marks
from .verify import Appends, verify
from .verify.forced import every_side_runs, forced_runs
from .verify.program_start import ProgramStart
from .verify.size_probes import USER_SHAPES, size_checks, size_probes, with_guard_places


def _list_at(model, target: str):
    """The list the epilogue appends to at ``target`` (a shared slot, or the user's model's
    attribute), or None where there is none."""
    try:
        return resolve_list(None if is_shared(target) else model, target)
    except StitchError:
        return None


def check_texts(gm: torch.fx.GraphModule) -> list[str]:
    """The messages of the in-graph checks of ``gm`` and of every subgraph it calls."""
    return [n.args[1] for m in gm.modules() if isinstance(m, torch.fx.GraphModule)
            for n in m.graph.nodes if n.op == "call_function"
            and n.target is torch.ops.aten._assert_async.msg and len(n.args) > 1]


def finish(model, work, census, exported: Exported, inputs: list[Example], dynamic_shapes,
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
    serializable_sym_ops(ep.graph_module)  # torch.sym_sum, which torch.export.save refuses
    numel_as_sizes(ep.graph_module)  # a count of unbacked sizes the lowerings' re-trace loses
    # keeps its branch marks: forced runs copy it (no marks, nothing to force: no copy)
    marked = graph_copy(ep.module()) if read_marks(ep.graph_module) else None
    sites = read_marks(marked) if marked is not None else {}
    strip_marks(ep.graph_module)  # the deployed graph has none
    dead_reads = drop_dead_constant_reads(ep.graph_module)  # before verification covers it
    inlined = inline_branch_constants(ep.graph_module)  # lets AOTInductor take the branches
    epilogue = replace(epilogue, messages=referenced_messages(check_texts(ep.graph_module)))
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


def partial_program(model, work, census, left_over: Remaining, inputs, settings, seconds):
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
