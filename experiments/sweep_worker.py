"""One model of the sweep, in its own process: ``python sweep_worker.py SUITE NAME OUT``.

Stages, each timed: build -> eager (every example; example 0 twice, seeded: is it
deterministic?) -> dynamo (``stitch.explain``: graphs, breaks by kind) -> torch_export
(non-strict, compared with eager) -> stitch (``stitch.export``, its program compared with
eager by this harness too). torch_export and stitch each take a copy of the model as
built, never called (the eager stage's calls warm first-call state).
The record is rewritten to OUT after every stage, so a timeout still says how far it got.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import io
import json
import os
import sys
import time
import traceback
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import sweep_libs  # noqa: E402
from sweep_hf import BuildError  # noqa: E402

RTOL = ATOL = 1e-4


def _lines(e: BaseException, n: int = 3) -> str:
    text = "\n".join(str(e).strip().splitlines()[:n])
    return f"{type(e).__name__}: {text}"[:600]


def _where(e: BaseException) -> str:
    """file:line of the innermost frame the exception passed through (for reproductions)."""
    frames = traceback.extract_tb(e.__traceback__)
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else ""


def _leaves(out) -> list[torch.Tensor]:
    from torch.utils._pytree import tree_leaves

    if hasattr(out, "to_tuple"):  # transformers ModelOutput
        out = out.to_tuple()
    return [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]


def compare(expected, got) -> tuple[bool, float, str]:
    """(equal within tolerance, max abs error, why not)."""
    a, b = _leaves(expected), _leaves(got)
    if len(a) != len(b):
        return False, float("inf"), f"{len(a)} tensor outputs expected, got {len(b)}"
    worst = 0.0
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if x.shape != y.shape:
            return False, float("inf"), f"output {i}: shape {tuple(x.shape)} vs {tuple(y.shape)}"
        if x.numel() and x.dtype.is_floating_point:
            diff = (x.double() - y.double()).abs().nan_to_num(0.0)
            worst = max(worst, diff.max().item())
        try:
            torch.testing.assert_close(y, x, rtol=RTOL, atol=ATOL, equal_nan=True,
                                       check_dtype=False, check_device=False)
        except AssertionError as err:
            return False, worst, f"output {i}: {str(err).splitlines()[0][:200]}"
    return True, worst, ""


def run(fn, args, kwargs):
    torch.manual_seed(0)
    with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


class Record:
    def __init__(self, path: str, suite: str, name: str) -> None:
        self.path = path
        self.data: dict = {"suite": suite, "model": name, "seconds": {}, "stage": "start"}

    @contextlib.contextmanager
    def stage(self, name: str):
        self.data["stage"] = name
        self.save()
        start = time.perf_counter()
        try:
            yield self.data.setdefault(name, {})
        finally:
            self.data["seconds"][name] = round(time.perf_counter() - start, 2)
            self.save()

    def save(self) -> None:
        with open(self.path + ".tmp", "w") as f:
            json.dump(self.data, f, default=str)
        os.replace(self.path + ".tmp", self.path)


def build(suite: str, name: str, rec: dict):
    """(model, args, kwargs, further examples)."""
    if suite in sweep_libs.SUITES:
        model, args, kwargs, examples = sweep_libs.build(suite, name, rec)
    elif suite == "torchvision":
        import sweep_vision

        model, args, kwargs = sweep_vision.build(name)
        family = sweep_vision.architectures()[name]
        examples = [sweep_vision.inputs(name, family, seed=1)]
    else:
        model, config, args, kwargs, example = _build_hf(name, rec)
        examples = [example]
        rec["class"] = type(model).__name__
        rec["inputs"] = sorted(kwargs) + (["<main positional>"] if args else [])
    rec["params"] = sum(p.numel() for p in model.parameters())
    return model, args, kwargs, examples


def _build_hf(name: str, rec: dict):
    """The first of ``sweep_hf.PLANS`` whose model constructs and runs both inputs eagerly;
    where none runs, the first that constructs (the eager stage then records why); where
    none constructs, the first plan's BuildError. Each plan that failed is recorded."""
    import sweep_hf

    tried, first, built = {}, None, None
    for plan in sweep_hf.PLANS:
        try:
            model, config, changed = sweep_hf.build(name, sweep_hf.architectures()[name], plan)
            args, kwargs = sweep_hf.make_inputs(model, config)
            example = sweep_hf.make_inputs(model, config, seed=1)
        except BuildError as e:
            tried[plan] = str(e)
            first = first or e
            continue
        built = built or (plan, changed, (model, config, args, kwargs, example))
        try:
            for a, k in ((args, kwargs), example):
                run(model, a, k)
        except Exception as e:
            tried[plan] = "eager: " + _lines(e)
            continue
        built = (plan, changed, (model, config, args, kwargs, example))
        break
    rec["plans_failed"] = tried
    if built is None:
        raise first
    rec["plan"], rec["shrunk"] = built[0], len(built[1])
    return built[2]


def _cold(model):
    """A copy of ``model`` as built (the model itself where it cannot be copied)."""
    try:
        return copy.deepcopy(model)
    except Exception:  # noqa: BLE001 - a model deepcopy refuses is exported as it is
        return model


def stages(rec: Record, suite: str, name: str) -> None:
    import stitch

    with rec.stage("build") as r:
        try:
            model, args, kwargs, examples = build(suite, name, r)
            r["ok"] = True
        except BuildError as e:
            r.update(ok=False, error=str(e))
            return
    inputs = [(args, kwargs), *examples]
    # torch.export and stitch get the model as built, never called: what a user exporting a
    # freshly built model gives them. The eager stage's calls warm first-call state (a
    # cache a forward fills on first use), which would hide it from both.
    cold = [_cold(model), _cold(model)]
    rec.data["cold_exports"] = all(c is not model for c in cold)
    with rec.stage("eager") as r:
        try:
            eager = [run(model, a, k) for a, k in inputs]
            r["deterministic"] = compare(eager[0], run(model, args, kwargs))[0]
            r["ok"] = True
        except Exception as e:  # the builder's inputs do not fit: not stitch's business
            r.update(ok=False, error=_lines(e))
            return
    with rec.stage("dynamo") as r:
        try:
            census = stitch.explain(model, args, kwargs)
            r.update(ok=True, graphs=census.graph_count, breaks=census.break_count,
                     kinds=dict(collections.Counter(s.kind.value for s in census.sites)),
                     sites=[f"{s.kind.value} {s.location} {s.function}"
                            for s in census.sites][:20])
        except Exception as e:
            r.update(ok=False, error=_lines(e), stitch_error=isinstance(e, stitch.StitchError))
    torch._dynamo.reset()
    with rec.stage("torch_export") as r:
        plain_export(r, cold[0], inputs, eager)
    torch._dynamo.reset()
    with rec.stage("stitch") as r:
        try:
            program = stitch.export(cold[1], args, kwargs, examples=examples)
        except stitch.StitchError as e:
            sites = getattr(e, "sites", ())
            r.update(result="refused", error_class=type(e).__name__, message=_lines(e, 4),
                     kinds_left=sorted({s.kind.value for s in sites}),
                     sites_left=[f"{s.kind.value} {s.location}" for s in sites][:20])
            if "Settings(allow_guards=True)" in str(e):  # guards would give a program
                guarded(rec, cold[1], args, kwargs, examples, eager, inputs)
            return
        except Exception as e:
            r.update(result="crash", error=_lines(e, 4), where=_where(e),
                     traceback=traceback.format_exc()[-3000:])
            return
        report = program.report
        r.update(result=type(program).__name__, graphs_after=report.graphs_after,
                 guarded=sum(getattr(d.action, "value", "") == "guarded"
                             for d in report.decisions),
                 kinds_left=sorted({s.kind.value for s in report.remaining}),
                 forced=sum("forced" in c.what for c in report.checks),
                 forced_notes=[n for n in report.notes if "forced" in n][:3])
        try:
            checks = [compare(eager[i], run(program, a, k)) for i, (a, k) in enumerate(inputs)]
            r["matches"] = all(c[0] for c in checks)
            r["max_abs_error"] = max(c[1] for c in checks)
            r["why_not"] = next((c[2] for c in checks if not c[0]), "")
        except Exception as e:
            r.update(matches=False, why_not="program raised " + _lines(e), where=_where(e))


def plain_export(r: dict, model, inputs: list, eager: list) -> None:
    """``torch.export.export`` (non-strict) from example 0, each dimension whose size differs
    among the examples marked ``Dim.AUTO`` (as stitch reads them; static where the examples
    share their shapes), then its program against eager on every example: an example the
    program cannot run (a size torch.export fixed) counts as a mismatch."""
    from capture.inputs import normalize
    from stitch.example_shapes import shapes_from_examples

    try:
        (args, kwargs), *more = inputs
        examples = normalize(model, args, kwargs, [tuple(ex) for ex in more])
        shapes = shapes_from_examples(model, examples)
        ep = torch.export.export(model, examples[0].args, examples[0].kwargs,
                                 dynamic_shapes=shapes, strict=False)
    except Exception as e:
        r.update(ok=False, error=_lines(e))
        return
    r.update(ok=True, dynamic=shapes is not None)
    module, checks = ep.module(), []
    for i, ex in enumerate(examples):
        try:
            checks.append(compare(eager[i], run(module, ex.args, ex.kwargs)))
        except Exception as e:
            checks.append((False, float("inf"), f"example {i}: program raised {_lines(e)}"))
    r["matches"] = all(c[0] for c in checks)
    r["max_abs_error"] = max(c[1] for c in checks)
    r["why_not"] = next((c[2] for c in checks if not c[0]), "")


def guarded(rec: Record, model, args, kwargs, examples, eager, inputs) -> None:
    """The stage a refusal suggesting guards gets: ``stitch.export`` with
    ``Settings(allow_guards=True)``; an input the program refuses by a guard
    (SpecializationError) is recorded as such, any other is compared with eager."""
    import stitch

    torch._dynamo.reset()
    with rec.stage("stitch_guarded") as r:
        try:
            program = stitch.export(model, args, kwargs, examples=examples,
                                    settings=stitch.Settings(allow_guards=True))
        except stitch.StitchError as e:
            r.update(result="refused", error_class=type(e).__name__, message=_lines(e, 4))
            return
        except Exception as e:
            r.update(result="crash", error=_lines(e, 4), where=_where(e),
                     traceback=traceback.format_exc()[-3000:])
            return
        r.update(result=type(program).__name__, graphs_after=program.report.graphs_after,
                 guards=list(program.report.guards)[:10])
        outcomes = []
        for i, (a, k) in enumerate(inputs):
            try:
                outcomes.append(compare(eager[i], run(program, a, k)))
            except stitch.SpecializationError:
                outcomes.append((None, 0.0, "refused by a guard"))
            except Exception as e:
                outcomes.append((False, float("inf"), "program raised " + _lines(e)))
        r["inputs"] = ["guard" if ok is None else "match" if ok else "differs"
                       for ok, _, _ in outcomes]
        r["matches"] = outcomes[0][0] is True and all(ok is not False for ok, _, _ in outcomes)
        r["max_abs_error"] = max(err for _, err, _ in outcomes)
        r["why_not"] = next((why for ok, _, why in outcomes if ok is not True), "")


def main() -> int:
    suite, name, out = sys.argv[1:4]
    torch.set_num_threads(1)
    rec = Record(out, suite, name)
    try:
        stages(rec, suite, name)
        rec.data["stage"] = "done"
    except Exception as e:  # a harness bug: recorded, never hidden
        rec.data["harness_error"] = _lines(e) + " at " + _where(e)
    rec.save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
