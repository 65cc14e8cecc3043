"""Real models the sweep turns into one verified graph, on a CUDA GPU (the device tool lends
one to some sessions; not part of ``make test``).

Per model, in its own process with a time limit: build it from the sweep's builder (tiny
config, random weights), move it and its two inputs to CUDA, call it once in eager (models
that set state on their first call), ``stitch.export`` on CUDA inputs, then each deployable
variant — eager / inductor, each with and without CUDA-graph replay — built, compared with
the eager model on both inputs, and timed with the eager model and ``torch.compile`` of the
original (graph breaks and all) in one interleaved run: ratios to eager (< 1 is faster).
``auto`` is not run here: its AOTInductor probe compiles for over a minute per process.

Usage: python experiments/gpu_models.py OUT_DIR [--budget SECONDS] suite:name ...
Writes ``OUT_DIR/gpu_models.jsonl``, one line per model, as each finishes.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.dirname(HERE))

DEVICE = os.environ.get("GPU_MODELS_DEVICE", "cuda")  # "cpu": a dry run of this script
# GPU_MODELS_VARIANTS: backend[+cudagraphs],... (default: eager and inductor, each both ways)
VARIANTS = [(v.split("+")[0], v.endswith("+cudagraphs")) for v in os.environ.get(
    "GPU_MODELS_VARIANTS", "eager,eager+cudagraphs,inductor,inductor+cudagraphs").split(",")]


def _quiet():
    stack = contextlib.ExitStack()
    stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
    stack.enter_context(warnings.catch_warnings())
    warnings.simplefilter("ignore")
    return stack


def one(suite: str, name: str) -> dict:
    import torch
    import torch.utils._pytree as pytree
    from gpu_check import _err, _time
    from sweep_worker import build, compare, run

    import stitch

    def _cuda(tree):
        return pytree.tree_map(lambda t: t.to(DEVICE) if isinstance(t, torch.Tensor) else t,
                               tree)

    if DEVICE == "cpu":
        torch.cuda.synchronize = lambda: None

    row: dict = {"suite": suite, "model": name}
    model, args, kwargs, examples = build(suite, name, {})
    model = model.eval().to(DEVICE)
    inputs = [(_cuda(args), _cuda(kwargs))] + [(_cuda(a), _cuda(k)) for a, k in examples]
    run(model, *inputs[0])  # a model that sets state on its first call (see guarantees.md)
    start = time.perf_counter()
    try:
        with _quiet():
            program = stitch.export(model, *inputs[0], examples=inputs[1:])
    except Exception as e:  # noqa: BLE001
        row["export"] = _err(e)
        return row
    row["export_s"] = round(time.perf_counter() - start, 1)
    row["breaks_after"] = program.report.breaks_after
    row["graph_ops"] = dict(program.report.graph_ops)
    fns = {"eager_model": model, "compile_original": torch.compile(model)}
    variants = {}
    for backend, graphs in VARIANTS:
        label = backend + ("+cudagraphs" if graphs else "")
        start = time.perf_counter()
        try:
            with _quiet():
                compiled = stitch.compile(program, backend, cudagraphs=graphs)
            worst, why = 0.0, ""
            for a, k in inputs:
                ok, err, why_not = compare(run(model, a, k), run(compiled, a, k))
                worst = max(worst, err)
                why = why or why_not
            variants[label] = {"chosen": compiled.decision.chosen, "matches_eager": not why,
                               "max_abs_error": worst, "why_not": why,
                               "build_s": round(time.perf_counter() - start, 1)}
            if not why:
                fns["stitched_" + label] = compiled
        except Exception as e:  # noqa: BLE001
            variants[label] = {"error": _err(e)}
    row["variants"] = variants
    try:
        with _quiet():
            row["latency"] = _time(fns, inputs, repeats=30)
    except Exception as e:  # noqa: BLE001
        row["latency"] = _err(e)
    return row


def main() -> int:
    if sys.argv[1] == "--one":
        suite, name, path = sys.argv[2:5]
        try:
            row = one(suite, name)
        except Exception:  # noqa: BLE001
            row = {"suite": suite, "model": name, "crash": traceback.format_exc()[-2500:]}
        with open(path, "w") as f:
            json.dump(row, f, default=str)
        return 0
    out, rest = sys.argv[1], sys.argv[2:]
    budget = 1e9
    if rest[:1] == ["--budget"]:
        budget, rest = float(rest[1]), rest[2:]
    os.makedirs(out, exist_ok=True)
    deadline = time.monotonic() + budget
    for item in rest:
        suite, name = item.split(":")
        left = deadline - time.monotonic()
        if left < 30:
            row = {"suite": suite, "model": name, "skipped": "the run's time budget was spent"}
        else:
            path = os.path.join(tempfile.gettempdir(), f"gpu_models_{suite}_{name}.json")
            start = time.perf_counter()
            try:
                limit = min(float(os.environ.get("GPU_MODELS_TIMEOUT", 240)), left)
                subprocess.run([sys.executable, __file__, "--one", suite, name, path],
                               timeout=limit, capture_output=True)
                with open(path) as f:
                    row = json.load(f)
                os.remove(path)
            except (subprocess.TimeoutExpired, FileNotFoundError) as e:
                row = {"suite": suite, "model": name, "error": f"{type(e).__name__}: {e}"}
            row["seconds"] = round(time.perf_counter() - start, 1)
        with open(os.path.join(out, "gpu_models.jsonl"), "a") as f:
            f.write(json.dumps(row, default=str) + "\n")
        print(json.dumps(row, default=str)[:1500], flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
