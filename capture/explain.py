"""``explain``: the census pipeline, top to bottom.

    check inputs -> run eagerly (the model's own errors surface here, unchanged)
    -> compile with a recording backend and run every example (fragments, raw breaks)
    -> group breaks into sites and classify them (a break echoed by a frame Dynamo skipped
       belongs to the break that made it skip)
    -> optionally export a copy with torch.export: a line it stops at that Dynamo did not
       break at is a site too (``found_by=export``)
    -> run compiled again under a line tracer (timeline: fragments and the glue between)
    -> run eagerly under a line tracer (branch outcomes, module paths of sites)
    -> assemble the census and its flow graph.

All of it happens on a copy of the model, with RNG streams, Dynamo's config and caches,
and Python's trace function restored afterwards.
"""

from __future__ import annotations

import contextlib
import time
from collections import OrderedDict
from typing import Any

import torch

from .census import Census, ExampleTrace, Fragment, TimelineStep
from .dynamo_breaks import RawBreak, recording_breaks, tolerant_recompile_reasons
from .errors import CaptureError, gist
from .export_probe import ExportProbe, probe_export
from .flow import build_flow
from .inputs import Example, normalize
from .isolation import (
    observing_output,
    preserved_dynamo,
    preserved_rng,
    quiet_torch_logs,
    reset_examples,
    restoring_state,
    working_copy,
)
from .recorder import RecordingBackend, Run
from .sites import BreakKind, BreakSite, Evidence, called_names, classify, side_effect_calls
from .source import (
    assert_aliases,
    enclosing_function,
    is_user_file,
    qualname_at,
    source_line,
    statement_at,
    statement_line,
    warn_aliases,
)
from .tracer import Condition, EagerTracer, TimelineTracer, conditions_in
from .tracing_fixes import tracing_fixes


def explain(model: Any, args: Any = (), kwargs: dict | None = None, *,
            examples: list | None = None, export_probe: bool = False,
            timeline: bool = True) -> Census:
    """Census of ``model``'s graph breaks on ``(args, kwargs)`` and any further ``examples``.

    ``export_probe=True`` also exports a copy of the model with torch.export (non-strict, on
    the first example; it costs one export, two when it fails on a data-dependent value,
    timed as ``seconds["export_probe"]``) and lists the lines it stops at where Dynamo did
    not break. The default is off because
    stitch.export's pipeline calls this every rewrite round and exports by itself;
    ``public_explain`` (the user-facing census) turns it on.

    ``timeline=False`` leaves out the second compiled run under a line tracer, which gives
    each example's fragment order and timeline and the flow graph (empty then, and
    ``graph_count`` counts the graphs compiled): the census of a rewrite round needs only
    the sites and the eager trace. That run can cost a quarter of a census: a frame first
    compiled for a later example's sizes is compiled again in it for the first's.
    """
    inputs = normalize(model, args, kwargs, examples)
    seconds: dict[str, float] = {}
    with preserved_rng(), preserved_dynamo(), quiet_torch_logs(), \
            tolerant_recompile_reasons(), _stage(seconds, "total"):
        work, copied = working_copy(model)
        with contextlib.nullcontext() if copied else restoring_state(model), torch.no_grad():
            with _stage(seconds, "eager"):
                _run_eager(work, inputs)
            with _stage(seconds, "compile"):
                recorder, raw, config = _compiled_runs(work, inputs)
            sites, library_breaks = _sites_from(raw)
            probe: ExportProbe | None = None
            if export_probe:
                with _stage(seconds, "export_probe"):
                    found, probe = probe_export(work, inputs[0], sites)
                sites += found
            site_lines = {(s.filename, s.lineno): s.id for s in sites}
            if timeline:
                with _stage(seconds, "timeline"), torch._dynamo.config.patch(**config):
                    runs, timelines = _run_timeline(work, inputs, recorder, site_lines)
            else:
                runs, timelines = [Run() for _ in inputs], [() for _ in inputs]
            with _stage(seconds, "eager_trace"):
                conditions, traces = _run_eager_traced(work, inputs, sites, site_lines)
    sites = _with_module_paths(sites, traces)
    fragments = _fragments(recorder, runs)
    examples_out = tuple(
        ExampleTrace(
            index=i,
            fragment_order=tuple(c.fragment for c in run.calls),
            timeline=timelines[i],
            outcomes=tuple(trace[0].outcomes),
            site_order=tuple(s for s, _ in trace[0].site_hits),
            stdout=trace[1].stdout,
            warnings=tuple(trace[1].warnings),
            logs=tuple(trace[1].logs),
        )
        for i, (run, trace) in enumerate(zip(runs, traces, strict=True))
    )
    return Census(
        graph_count=len(fragments),
        # the breaks the sites list, so the summary's total is the sum of its rows; graphs
        # also count recompiles (one per trip count, per branch side), so graphs - 1 is not it
        break_count=sum(s.count for s in sites),
        sites=tuple(sites),
        fragments=tuple(fragments),
        conditions=tuple(conditions),
        examples=examples_out,
        flow=build_flow(fragments, timelines, runs),
        library_breaks=library_breaks,
        export_probe=probe,
        seconds={k: round(v, 3) for k, v in seconds.items()},
    )


def public_explain(model: Any, args: Any = (), kwargs: dict | None = None, *,
                   examples: list | None = None, export_probe: bool = True) -> Census:
    """``explain`` as users call it (``stitch.explain``, ``stitch explain``): with the export
    probe on, so the census also names what stops torch.export."""
    return explain(model, args, kwargs, examples=examples, export_probe=export_probe)


@contextlib.contextmanager
def _stage(seconds: dict[str, float], name: str):
    start = time.perf_counter()
    try:
        yield
    finally:
        seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - start


def _call(model, ex: Example):
    reset_examples(ex)  # each run from the example's values as given (examples_kept)
    return model(*ex.args, **ex.kwargs)


def _run_eager(work, inputs: list[Example]) -> None:
    for i, ex in enumerate(inputs):
        with observing_output():
            try:
                _call(work, ex)  # the model's own exceptions propagate unchanged
            except Exception as e:
                e.add_note(f"raised by the model itself on example {i}, run eagerly before "
                           "anything was traced: stitch exports what the model computes on "
                           "examples it runs on")
                raise


# Dynamo's record of the sizes a frame has seen, from which it makes them dynamic on a
# recompile (``automatic_dynamic_shapes``), can fail on its own bookkeeping (torch 2.14:
# ``IndexError`` in ``pgo.is_stride_dynamic`` on torch_geometric's GraphUNet, whose pooling
# hands frames tensors of other ranks): the census is then taken with every frame compiled
# for the sizes it is given, which finds the same breaks
_STATIC_RECOMPILES = {"automatic_dynamic_shapes": False}


def _compiled_runs(work, inputs: list[Example]):
    """``_run_compiled``, and the Dynamo config it ran under: where it failed, once more with
    automatic dynamic shapes off (its error is raised where that fails too)."""
    try:
        return (*_run_compiled(work, inputs), {})
    except CaptureError as first:
        torch._dynamo.reset()
        try:
            with torch._dynamo.config.patch(**_STATIC_RECOMPILES):
                return (*_run_compiled(work, inputs), _STATIC_RECOMPILES)
        except CaptureError:
            raise first from first.__cause__


def _run_compiled(work, inputs: list[Example]) -> tuple[RecordingBackend, list[RawBreak]]:
    recorder = RecordingBackend()
    compiled = torch.compile(work, backend=recorder)
    # Python floats are constants, as torch.export sees them: a float passed into a frame
    # compiled after a break (torchvision's RPN hands its NMS threshold to batched_nms) is
    # not made a symbolic input, which an op taking only a Python float cannot take
    with recording_breaks() as raw, torch._dynamo.config.patch(specialize_float=True), \
            tracing_fixes():
        for i, ex in enumerate(inputs):
            recorder.start_run()
            try:
                with observing_output():
                    _call(compiled, ex)
            except Exception as e:
                error = CaptureError(
                    f"torch.compile failed on example {i} although the model runs eagerly: "
                    f"{gist(e).rstrip('.')}. "
                    "This is a torch.compile limitation; report it with the census of a "
                    "smaller input, or exclude that example.")
                error.example = i  # which example: a census of fewer examples fails too
                raise error from e
            finally:
                recorder.end_run()
    return recorder, list(raw)


def _sites_from(raw: list[RawBreak]) -> tuple[list[BreakSite], int]:
    """One site per innermost user frame; Dynamo's nested retries are folded in."""
    groups: OrderedDict[tuple[str, int], list[tuple[RawBreak, bool]]] = OrderedDict()
    library = 0
    echoes = _echoes(raw)
    for i, record in enumerate(raw):
        user = [f for f in record.stack if is_user_file(f.filename)]
        if not user:
            library += 1
            continue
        if i in echoes:  # the same break, seen from a frame Dynamo skipped because of it
            groups.setdefault(echoes[i], []).append((record, False))
            continue
        # A break counts once, in the frame Dynamo was compiling; attempts that failed while
        # inlining a call (several user frames on the stack) are the same break seen from above.
        counted = len(user) == 1 and record.stack[0] == user[0]
        # named by the statement holding it (a test over several lines breaks on a later one)
        at = (user[-1].filename, statement_line(user[-1].filename, user[-1].lineno))
        groups.setdefault(at, []).append((record, counted))
    sites = []
    for n, ((filename, lineno), records) in enumerate(groups.items(), start=1):
        first = next((r for r, counted in records if counted), records[0][0])
        longest = max((r for r, _ in records), key=lambda r: len(r.stack))
        statement = statement_at(filename, lineno)
        node = statement.node if statement else None
        evidence = Evidence(first.gb_type, first.reason, node, called_names(node),
                            side_effect_calls(node, warn_aliases(filename)),
                            assert_aliases(filename))
        kind, rule = classify(evidence)
        sites.append(BreakSite(
            id=f"S{n}", kind=kind, rule=rule, gb_type=first.gb_type, reason=first.reason,
            filename=filename, lineno=lineno, source_line=source_line(filename, lineno),
            function=qualname_at(filename, lineno) or first.stack[-1].name,
            count=max(1, sum(1 for _, counted in records if counted)),
            call_chain=tuple(
                f"{f.filename}:{f.lineno} in {qualname_at(f.filename, f.lineno) or f.name}"
                for f in longest.stack if is_user_file(f.filename)
            ),
            data_dependent=evidence.data_dependent,
            stopped_in=f"{first.stack[-1].filename}:{first.stack[-1].name}",
        ))
    return sites, library


def _echoes(raw: list[RawBreak]) -> dict[int, tuple[str, int]]:
    """Records that echo a deeper break: index -> (file, line) of that break's site.

    A break deep in a call can make Dynamo skip an outer frame F ("falling back to eager":
    transformers' ``capture_outputs`` wrapper calls the forward in a ``try``). F then runs
    eagerly and Dynamo compiles the code F runs on its own, its comprehensions too; one it
    cannot compile alone (a dict comprehension over a registry) breaks in a stack of one
    frame. That line is no break of the model's: an inlined trace of F got past it (F is an
    outer frame of the deeper break's stack, at a later line). Attributed to the deeper
    break, the innermost user frame, it is not a second site.
    """
    past: dict[tuple[str, int], tuple[int, tuple[str, int]]] = {}  # F -> (line, deeper site)
    for record in raw:
        user = [f for f in record.stack if is_user_file(f.filename)]
        for frame in user[:-1]:
            func = enclosing_function(frame.filename, frame.lineno)
            if func is None or func.name != frame.name:  # a resume function, nested code
                continue
            key = (frame.filename, func.lineno)
            if frame.lineno > past.get(key, (0, None))[0]:
                past[key] = (frame.lineno, (user[-1].filename, user[-1].lineno))
    echoes = {}
    for i, record in enumerate(raw):
        user = [f for f in record.stack if is_user_file(f.filename)]
        if len(user) != 1 or not user[0].name.startswith("<"):  # <dictcomp>, <genexpr> ...
            continue
        func = enclosing_function(user[0].filename, user[0].lineno)
        seen = past.get((user[0].filename, func.lineno)) if func is not None else None
        if seen is not None and seen[0] > user[0].lineno:
            echoes[i] = seen[1]
    return echoes


def _run_timeline(work, inputs: list[Example], recorder: RecordingBackend,
                  site_lines: dict[tuple[str, int], str]):
    """Run the compiled model again (no recompiles expected) under a line tracer."""
    compiled = torch.compile(work, backend=recorder)
    files = {f for f, _ in site_lines}
    runs: list[Run] = []
    timelines: list[tuple[TimelineStep, ...]] = []
    for ex in inputs:
        events: list = []
        recorder.events = events
        recorder.start_run()
        try:
            with observing_output(), TimelineTracer(files, events), tracing_fixes():
                _call(compiled, ex)
        except Exception as e:  # Dynamo failing in this second run is a refusal, not a crash
            raise CaptureError(
                f"torch.compile failed on example {len(runs)} (its second run, traced line by "
                f"line) although the model runs eagerly: {gist(e).rstrip('.')}. This is a "
                "torch.compile limitation; report it with the census of a smaller input."
            ) from e
        finally:
            recorder.events = None
            runs.append(recorder.end_run())
        timelines.append(_timeline(events, site_lines))
    return runs, timelines


def _timeline(events: list, site_lines: dict[tuple[str, int], str]) -> tuple[TimelineStep, ...]:
    steps: list[TimelineStep] = []
    lines: list[str] = []
    sites: list[str] = []

    def flush():
        if lines:
            steps.append(TimelineStep("glue", None, tuple(lines), tuple(dict.fromkeys(sites))))
            lines.clear()
            sites.clear()

    for event in events:
        if event[0] == "fragment":
            flush()
            steps.append(TimelineStep("fragment", event[1]))
        else:
            _, filename, lineno = event
            location = f"{filename}:{lineno}"
            if not lines or lines[-1] != location:
                lines.append(location)
            at = (filename, statement_line(filename, lineno))
            if at in site_lines:
                sites.append(site_lines[at])
    flush()
    return tuple(steps)


def _run_eager_traced(work, inputs: list[Example], sites: list[BreakSite],
                      site_lines: dict[tuple[str, int], str]):
    functions: dict[str, set[int]] = {}
    for s in sites:
        func = enclosing_function(s.filename, s.lineno)
        if func is not None:
            functions.setdefault(s.filename, set()).add(func.lineno)
    seeds = {(s.filename, s.lineno) for s in sites if s.kind == BreakKind.SCALAR_READ}
    conditions: list[Condition] = []
    for filename, starts in functions.items():
        conditions += conditions_in(
            filename, starts,
            site_lines={ln for f, ln in site_lines if f == filename},
            tainted_seed_lines={ln for f, ln in seeds if f == filename},
        )
    module_names = ({id(m): name for name, m in work.named_modules()}
                    if isinstance(work, torch.nn.Module) else {})
    traces = []
    for ex in inputs:
        tracer = EagerTracer(conditions, site_lines, module_names)
        with observing_output() as observed, tracer as record:
            _call(work, ex)
        traces.append((record, observed))
    return conditions, traces


def _with_module_paths(sites: list[BreakSite], traces) -> list[BreakSite]:
    from dataclasses import replace

    paths: dict[str, list[str]] = {}
    for record, _ in traces:
        for site, path in record.site_hits:
            seen = paths.setdefault(site, [])
            if path not in seen:
                seen.append(path)
    return [replace(s, module_paths=tuple(paths.get(s.id, ())),
                    module_path=(paths.get(s.id) or [""])[0]) for s in sites]


def _fragments(recorder: RecordingBackend, runs: list[Run]) -> list[Fragment]:
    out = []
    for rec in recorder.fragments:
        positions = {
            i: tuple(p for p, c in enumerate(run.calls) if c.fragment == rec.index)
            for i, run in enumerate(runs)
        }
        gm = rec.graph_module
        out.append(Fragment(
            index=rec.index,
            op_count=sum(1 for n in gm.graph.nodes
                         if n.op in ("call_function", "call_method", "call_module")),
            input_sources=rec.input_sources,
            ends_with_break=rec.ends_with_break,
            break_reason=rec.break_reason,
            code=gm.code,
            runs={i: p for i, p in positions.items() if p},
            graph_module=gm,
        ))
    return out
