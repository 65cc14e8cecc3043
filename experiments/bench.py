"""``make bench``: stitch against the alternatives, same machine, one run.

Rows: zoo models (latency, cold start, breaks) and real transformers models (breaks before
and after; latency where the row says so). Writes experiments/results/latest.json and .md.
Latency: one thread, the row's batch, warm-up then the median of interleaved runs; the
interquartile range is reported as the spread. Nothing here asserts a target: the table
says which targets were met.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)  # the zoo rows build their models from the test zoo (tests.zoo)
ZOO_ROWS = ["branch_on_tensor", "flag_then_branch", "print_stats", "log_warning",
            "elif_chain", "nested_encoder", "tensor_counted_loop", "buffer_in_branch",
            "print_in_branch", "assert_finite", "effects_in_nested_branches"]
HF_CURRENT = ["longformer", "led", "xlm", "flaubert", "switch"]
HF_LEGACY = ["t5_cond_gen", "bart_cond_gen", "marian_mt", "whisper", "biogpt_causal", "blenderbot",
             "pegasus_causal", "layoutlmv3", "phi3_longrope"]
REPEATS = int(os.environ.get("STITCH_BENCH_REPEATS", "200"))


def _median_iqr(samples):
    q = statistics.quantiles(samples, n=4)
    return round(statistics.median(samples), 4), round(q[2] - q[0], 4)


def _interleaved(fns: dict, inputs: list, repeats: int) -> dict:
    """Median and IQR (ms per input) of each fn; each repeat runs every fn once, in a freshly
    shuffled order (seeded). A fixed or rotated order keeps each variant after the same
    neighbour, and the one after eager or Dynamo measured ~20% slow from their cache
    footprint (an identical graph, timed twice, differed by that much)."""
    import random

    times = {k: [] for k in fns}
    names = list(fns)
    shuffle = random.Random(0).shuffle
    with torch.no_grad():
        for _ in range(3):
            for fn in fns.values():
                for a, k in inputs:
                    fn(*a, **k)
        for _ in range(repeats):
            shuffle(names)
            for name in names:
                fn = fns[name]
                start = time.perf_counter()
                for a, k in inputs:
                    fn(*a, **k)
                times[name].append((time.perf_counter() - start) * 1e3 / len(inputs))
    return {k: _median_iqr(v) for k, v in times.items()}


def _per_backend(compiled) -> dict:
    """``stitched_<backend>`` for every candidate the deployment selection built and timed
    (its own interleaved loop, example 0, same run)."""
    return {("model_eager" if c.name == "model" else f"stitched_{c.name}"): round(c.median_ms, 4)
            for c in compiled.decision.candidates if c.median_ms is not None}


COLD_COMPILE = """
import time
start = time.perf_counter()
import torch, contextlib, io
import stitch
imported = time.perf_counter()
from tests.zoo import make
model, args, kwargs, examples = make({name!r})
compiled = torch.compile(model)
with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()):
    for a, k in [(args, kwargs)] + examples:
        compiled(*a, **k)
print("COLD", time.perf_counter() - start, time.perf_counter() - imported)
"""

COLD_ARTIFACT = """
import time
start = time.perf_counter()
import torch, contextlib, io
import stitch
imported = time.perf_counter()
from tests.zoo import make
program = stitch.load({path!r})
_, args, kwargs, examples = make({name!r})
with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()):
    for a, k in [(args, kwargs)] + examples:
        program(*a, **k)
print("COLD", time.perf_counter() - start, time.perf_counter() - imported)
"""


def _cold(code: str) -> tuple[float | None, float | None]:
    """(seconds from process start, seconds after `import torch, stitch`)."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, timeout=900, env=dict(os.environ, OMP_NUM_THREADS="1"))
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("COLD ")), None)
    if not line:
        return None, None
    total, after = line.split()[1:3]
    return round(float(total), 3), round(float(after), 3)


def zoo_row(name: str) -> dict:
    import contextlib
    import io

    import stitch
    from tests.zoo import make
    from tests.zoo.hand_fixed import FIXED, hand_fixed

    model, args, kwargs, examples = make(name)
    inputs = [(args, kwargs)] + examples
    row = {"model": name, "suite": "zoo", "batch": args[0].shape[0]}
    census = stitch.explain(model, args, kwargs, examples=examples)
    row["breaks_before"] = census.break_count
    start = time.perf_counter()
    program = stitch.export(model, args, kwargs, examples=examples)
    row["export_s"] = round(time.perf_counter() - start, 3)
    row["breaks_after"] = program.report.breaks_after
    row["single_graph"] = program.report.graphs_after == 1
    start = time.perf_counter()
    compiled = stitch.compile(program, "auto", repeats=20)
    row["compile_auto_s"] = round(time.perf_counter() - start, 3)
    row["deployed"] = compiled.decision.chosen
    row["graph_deployed"] = compiled.decision.graph  # differs when the eager model won
    hand = None
    backend = compiled.decision.graph.split("+")[0]
    # where auto deployed the model, the stitched graph is timed too (against hand-fixed)
    graph = stitch.compile(program, backend) if compiled.backend == "model" else None
    if name in FIXED:  # the same backend as the stitched graph, same deploy path
        hand = stitch.compile(hand_fixed(name), backend)
    original = torch.compile(make(name)[0])
    start = time.perf_counter()
    with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()):
        for a, k in inputs:
            original(*a, **k)
    row["compile_original_s"] = round(time.perf_counter() - start, 3)
    eager = make(name)[0]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        # error first, on fresh state and in the model's order (stateful rows mutate buffers)
        err, reference = 0.0, make(name)[0]
        with torch.no_grad():
            for a, k in inputs:
                err = max(err, (compiled(*a, **k) - reference(*a, **k)).abs().max().item())
        fns = {"eager": eager, "compile_original": original, "stitched_auto": compiled}
        if graph is not None:
            fns["stitched_graph"] = graph
        if hand is not None:
            hand_err, reference = 0.0, make(name)[0]
            with torch.no_grad():
                for a, k in inputs:
                    hand_err = max(hand_err, (hand(*a, **k) - reference(*a, **k)).abs().max()
                                   .item())
            fns["hand_fixed"] = hand
        lat = _interleaved(fns, inputs, REPEATS)
    row["latency_ms"] = {k: v[0] for k, v in lat.items()} | _per_backend(compiled)
    row["latency_iqr_ms"] = {k: v[1] for k, v in lat.items()}
    row["max_abs_error"] = err
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, f"{name}.pt2")
        compiled.save(path)
        compile_cold = _cold(COLD_COMPILE.format(name=name))
        artifact_cold = _cold(COLD_ARTIFACT.format(path=path, name=name))
        row["cold_start_s"] = {"compile_original": compile_cold[0], "artifact": artifact_cold[0]}
        row["cold_start_after_import_s"] = {"compile_original": compile_cold[1],
                                            "artifact": artifact_cold[1]}
    row["hand_fixed"] = None if hand is None else {
        "backend": hand.backend, "max_abs_error": hand_err,
        "stitched_over_hand_fixed": round(
            row["latency_ms"].get("stitched_graph", row["latency_ms"]["stitched_auto"])
            / row["latency_ms"]["hand_fixed"], 3)}
    return row


HF_CODE = r"""
import contextlib, io, json, sys, time, torch, stitch
sys.path.insert(0, "experiments")
from bench import _interleaved, _per_backend
{build}
torch.set_num_threads(1)
rows = []
for name in {names!r}:
    model, args, kwargs, examples = BUILD(name)
    inputs = [(args, kwargs)] + list(examples or [])
    first = next(t for t in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor))
    row = {{"model": name, "batch": first.shape[0] if first.dim() else 1}}
    try:
        try:
            census = stitch.explain(model, args, kwargs, examples=examples)
            row["breaks_before"] = census.break_count
        except stitch.CaptureError as e:  # torch.compile itself fails on the model (TAPAS 4.52)
            row["compile_fails"] = str(e).splitlines()[0][:200]
        start = time.perf_counter()
        # a model the sweep made one graph only with guards on request gets them here too
        program = stitch.export(model, args, kwargs, examples=examples,
                                settings=stitch.Settings(allow_guards=name in {guarded!r}))
        row["export_s"] = round(time.perf_counter() - start, 3)
        row["breaks_after"] = program.report.breaks_after
        row["single_graph"] = program.report.graphs_after == 1
        row["guarded"] = sum(d.action.value == "guarded" for d in program.report.decisions)
        row["max_abs_error"] = max(c.max_abs_error for c in program.report.checks)
    except stitch.StitchError as e:
        row["single_graph"] = False
        row["why_not"] = str(e).splitlines()[0][:300]
        rows.append(row)
        continue
    try:
        quiet = (contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()))
        with quiet[0], quiet[1]:
            start = time.perf_counter()
            compiled = stitch.compile(program, "auto", repeats=10)
            row["compile_auto_s"] = round(time.perf_counter() - start, 3)
            row["deployed"] = compiled.decision.chosen
            row["graph_deployed"] = compiled.decision.graph
            row["candidates"] = {{c.name: c.reason for c in compiled.decision.candidates}}
            accepted = []  # a guarded program refuses inputs on the specialised-away side
            for a, k in inputs:
                try:
                    with torch.no_grad():
                        compiled(*a, **k)
                    accepted.append((a, k))
                except stitch.SpecializationError:
                    pass
            row["timed_inputs"] = len(accepted)
            inputs = accepted
            original = torch.compile(BUILD(name)[0])
            fns = {{"eager": model, "compile_original": original, "stitched_auto": compiled}}
            start = time.perf_counter()
            try:
                with torch.no_grad():
                    for a, k in inputs:
                        original(*a, **k)
                row["compile_original_s"] = round(time.perf_counter() - start, 3)
            except Exception as e:  # torch.compile itself fails on the model: no such column
                row["compile_original_error"] = f"{{type(e).__name__}}: {{str(e).splitlines()[0][:200]}}"
                del fns["compile_original"]
            lat = _interleaved(fns, inputs, {repeats})
        row["latency_ms"] = {{k: v[0] for k, v in lat.items()}} | _per_backend(compiled)
        row["latency_iqr_ms"] = {{k: v[1] for k, v in lat.items()}}
    except Exception as e:
        row["latency_error"] = f"{{type(e).__name__}}: {{str(e).splitlines()[0][:200]}}"
    rows.append(row)
print("ROWS" + json.dumps(rows))
"""
HF_REPEATS = int(os.environ.get("STITCH_BENCH_HF_REPEATS", "20"))


def _failed(name: str, suite: str, why: str) -> dict:
    return {"model": name, "suite": suite, "single_graph": False, "why_not": why}


# how HF_CODE builds a row's model: the hand-written builders of tests/zoo/hf.py
ZOO_BUILD = """from tests.zoo import hf
def BUILD(name):
    return getattr(hf, name)()"""


HF_TIMEOUT_S = 3000


def hf_rows(python: str, names: list[str], suite: str, build: str = ZOO_BUILD,
            guarded: frozenset[str] = frozenset()) -> list[dict]:
    """Rows for ``names``; those in ``guarded`` exported with ``Settings(allow_guards=True)``."""
    if not os.path.exists(python):
        return [_failed(n, suite, f"environment missing: {python}") for n in names]
    try:
        done = subprocess.run([python, "-c", HF_CODE.format(names=names, repeats=HF_REPEATS,
                                                            build=build,
                                                            guarded=sorted(guarded))],
                              capture_output=True, text=True, cwd=REPO, timeout=HF_TIMEOUT_S,
                              env=dict(os.environ, PYTHONPATH=REPO))
    except subprocess.TimeoutExpired:
        return [_failed(n, suite, f"benchmark process timed out after {HF_TIMEOUT_S} s")
                for n in names]
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("ROWS")), None)
    if line is None:
        return [_failed(n, suite, "benchmark process failed: " + done.stderr[-300:])
                for n in names]
    rows = json.loads(line[4:])
    for r in rows:
        r["suite"] = suite
    return rows


def targets(rows: list[dict]) -> dict:
    real = [r for r in rows if r["suite"] != "zoo" and "breaks_before" in r]
    before = sum(r["breaks_before"] for r in real)
    after = sum(r.get("breaks_after", r["breaks_before"]) if r.get("single_graph")
                else r["breaks_before"] for r in real)
    zoo = [r for r in rows if r["suite"] == "zoo" and "latency_ms" in r]
    ratios = sorted(r["latency_ms"]["stitched_auto"] / r["latency_ms"]["compile_original"]
                    for r in zoo)
    slower = [r["model"] for r in rows if "latency_ms" in r
              and r["latency_ms"]["stitched_auto"] > 1.05 * r["latency_ms"]["eager"]]
    cold = [r for r in zoo if r.get("cold_start_s", {}).get("artifact")
            and r["cold_start_s"].get("compile_original")]
    cold_ratios = [r["cold_start_s"]["compile_original"] / r["cold_start_s"]["artifact"]
                   for r in cold]
    after_import = [r["cold_start_after_import_s"]["compile_original"]
                    / r["cold_start_after_import_s"]["artifact"] for r in cold
                    if r.get("cold_start_after_import_s", {}).get("artifact")]
    hand = {r["model"]: r["hand_fixed"]["stitched_over_hand_fixed"] for r in zoo
            if r.get("hand_fixed")}
    return {
        "cold_start_min_speedup_after_import": round(min(after_import), 1) if after_import
        else None,
        "breaks_removed_fraction": round(1 - after / before, 4) if before else None,
        "breaks_removed_target_0.9_met": bool(before) and (1 - after / before) >= 0.9,
        "stitched_auto_slower_than_eager_rows": slower,
        "median_stitched_over_compile_original": round(statistics.median(ratios), 3)
        if ratios else None,
        "latency_target_0.8_met": bool(ratios) and statistics.median(ratios) <= 0.8,
        "cold_start_min_speedup": round(min(cold_ratios), 1) if cold_ratios else None,
        "cold_start_target_20x_met": bool(cold_ratios) and min(cold_ratios) >= 20,
        "stitched_over_hand_fixed": {r["model"]: r["hand_fixed"]["stitched_over_hand_fixed"]
                                     for r in zoo if r.get("hand_fixed")},
        "hand_fixed_target_5pct_met": bool(hand) and all(v <= 1.05 for v in hand.values()),
        "rows_over_5pct_slower_than_hand_fixed": sorted(k for k, v in hand.items() if v > 1.05),
    }


def markdown(result: dict) -> str:
    from tabulate import tabulate

    rows = []
    for r in result["rows"]:
        lat = r.get("latency_ms", {})
        cold = r.get("cold_start_s", {})
        rows.append([r["model"], r["suite"], r.get("breaks_before", "-"), r.get("breaks_after", "-"),
                     ("yes" + (f" ({r['guarded']} guarded)" if r.get("guarded") else ""))
                     if r.get("single_graph") else "no " + r.get("why_not", "")[:40],
                     lat.get("eager", "-"), lat.get("compile_original", "-"),
                     lat.get("stitched_auto", "-"), lat.get("hand_fixed", "-"),
                     lat.get("stitched_onnxruntime", "-"), r.get("deployed", "-"),
                     cold.get("compile_original", "-"), cold.get("artifact", "-"),
                     f"{r['max_abs_error']:.1e}" if "max_abs_error" in r else "-"])
    table = tabulate(rows, headers=["model", "suite", "breaks before", "after", "one graph",
                                    "eager ms", "compile(orig) ms", "stitched ms",
                                    "hand-fixed ms", "onnxruntime ms", "deployed",
                                    "cold compile s", "cold artifact s", "max err"],
                     tablefmt="github")
    meta = result["meta"]
    lines = [f"# stitch benchmark ({meta['commit'][:10]}, torch {meta['torch']}, "
             f"{meta['threads']} thread(s), {meta['cores']} cores, {meta['date']})", "", table,
             "", "## Targets", ""]
    lines += [f"- {k}: {v}" for k, v in result["targets"].items()]
    return "\n".join(lines) + "\n"


def main() -> int:
    torch.set_num_threads(1)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                            cwd=REPO).stdout.strip()
    rows = []
    only = os.environ.get("STITCH_BENCH_ONLY")
    for name in ZOO_ROWS if not only else [n for n in ZOO_ROWS if n in only.split(",")]:
        print(f"zoo: {name}", flush=True)
        try:
            rows.append(zoo_row(name))
        except Exception as e:  # noqa: BLE001 - a failing row is a result too
            rows.append(_failed(name, "zoo", f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"))
    import transformers

    print("transformers rows", flush=True)
    rows += hf_rows(sys.executable, HF_CURRENT, f"transformers-{transformers.__version__}")
    rows += hf_rows(os.path.join(REPO, ".venv-hf452", "bin", "python"), HF_LEGACY,
                    "transformers-4.52.4")
    result = {"meta": {"commit": commit, "torch": torch.__version__,
                       "transformers": transformers.__version__,
                       "python": platform.python_version(), "cores": os.cpu_count(),
                       "threads": torch.get_num_threads(), "repeats": REPEATS,
                       "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())},
              "rows": rows}
    result["targets"] = targets(rows)
    write_results(result, "latest", markdown)
    return 0


def write_results(result: dict, stem: str, render) -> None:
    """``results/<stem>.json`` and ``.md`` (``render(result)``), the table printed too."""
    with open(os.path.join(HERE, "results", f"{stem}.json"), "w") as f:
        json.dump(result, f, indent=2)
    text = render(result)
    with open(os.path.join(HERE, "results", f"{stem}.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    raise SystemExit(main())
