"""``make bench`` (second part): a latency row for every model the sweep turned into one
verified graph among those that break under torch.compile or that torch.export refuses.

The models and their inputs come from the sweep itself (``experiments/results/sweep.json``
and the sweep's builders: tiny configs, random weights), so the table follows the sweep: a
model stitch newly fixes gets a row at the next run. Each row: eager, torch.compile of the
original, and the deployed variant ``stitch.compile(program, "auto")`` chose (never slower
than eager by construction: eager itself is a candidate). Writes
``experiments/results/bench_sweep.{json,md}``; nothing here asserts a target.

``make bench-libs`` (``STITCH_BENCH_SWEEP=libs``) does the same for the library suites
(diffusers, timm, ultralytics, torch-geometric, kornia: ``sweep_libs.json``), into
``bench_libs.{json,md}``, the models in order of the sweep's export time, so a run cut short
has measured the most rows it could.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time

import torch
from bench import HERE, REPO, hf_rows, write_results
from sweep_report import Outcome, breaks, classify, guarded

SWEEP_BUILD = """import sweep_worker  # HF_CODE put experiments/ on the path
def BUILD(name):
    return sweep_worker.build({suite!r}, name, {{}})  # (model, args, kwargs, examples)"""
PYTHONS = {"hf452": os.path.join(REPO, ".venv-hf452", "bin", "python")}
# which sweep's records, and the table they go to
SOURCES = {"main": ("sweep.json", "bench_sweep"), "libs": ("sweep_libs.json", "bench_libs")}


def fixed_by_stitch(path: str) -> list[tuple[str, str]]:
    """(suite, model) for each model that breaks (or that torch.export refuses) and that the
    sweep saw stitch make into one verified graph: by suite and name, or for the library
    suites by the sweep's export time (fastest first)."""
    with open(path) as f:
        suites = json.load(f)["suites"]
    fixed = [(r, suite) for suite, data in suites.items() for r in data["records"]
             if breaks(r) and (classify(r).outcome == Outcome.ONE_GRAPH
                               or guarded(r) == "one_graph")]
    order = list(suites)
    if SOURCE == "libs":
        fixed.sort(key=lambda f: (f[0].get("seconds", {}).get("stitch", 1e9), f[0]["model"]))
    else:
        fixed.sort(key=lambda f: (order.index(f[1]), f[0]["model"]))
    return [(suite, r["model"]) for r, suite in fixed]


def guarded_only(path: str) -> set[str]:
    """The models the sweep made one graph only with guards on request (by name)."""
    with open(path) as f:
        suites = json.load(f)["suites"]
    return {r["model"] for data in suites.values() for r in data["records"]
            if classify(r).outcome != Outcome.ONE_GRAPH and guarded(r) == "one_graph"}


def _kept_rows(path: str) -> list[dict]:
    """The committed table's rows, each with the commit and date it was measured at; a row
    whose timing failed is measured again."""
    with open(path) as f:
        old = json.load(f)
    return [dict(r, commit=r.get("commit", old["meta"]["commit"][:10]),
                 date=r.get("date", old["meta"]["date"])) for r in old["rows"]
            if "latency_error" not in r]


def _note(row: dict) -> str:
    if row.get("latency_error"):
        return row["latency_error"][:60]
    if row.get("compile_original_error") or row.get("compile_fails"):
        return "torch.compile fails on the model"  # breaks before / compile(orig): none
    return ""


def markdown(result: dict) -> str:
    from tabulate import tabulate

    rows = []
    for r in result["rows"]:
        lat = r.get("latency_ms", {})
        ratio = (round(lat["stitched_auto"] / lat["eager"], 3)
                 if lat.get("eager") and lat.get("stitched_auto") else "-")
        rows.append([r["model"], r["suite"], r.get("breaks_before", "-"),
                     ("yes, guarded" if r.get("guarded") else "yes") if r.get("single_graph")
                     else "no " + r.get("why_not", "")[:60],
                     lat.get("eager", "-"), lat.get("compile_original", "-"),
                     lat.get("stitched_auto", "-"), r.get("deployed", "-"), ratio,
                     _note(r), r.get("commit", "")])
    table = tabulate(rows, headers=["model", "suite", "breaks before", "one graph",
                                    "eager ms", "compile(orig) ms", "stitched ms", "deployed",
                                    "stitched/eager", "note", "measured at"],
                     tablefmt="github")
    meta = result["meta"]
    title = "Library-suite" if SOURCE == "libs" else "Sweep"
    source = "sweep_libs.md" if SOURCE == "libs" else "sweep.md"
    return (f"# {title} models stitch fixes: latency ({meta['commit'][:10]}, torch "
            f"{meta['torch']}, 1 thread, {meta['cores']} cores, {meta['date']})\n\n"
            f"Models from [{source}]({source}) that break or that torch.export refuses, and "
            "that stitch made one verified graph (\"yes, guarded\": only with "
            "Settings(allow_guards=True), specialised to the example's values, e.g. its image "
            f"grid); batch 1, median of {meta['repeats']} "
            "interleaved repeats over the example and a second input. Each row's ratio "
            "is measured in one run (eager and stitched interleaved); rows measured at "
            "another commit say so.\n\n" + table + "\n")


SOURCE = os.environ.get("STITCH_BENCH_SWEEP", "main")


def main() -> int:
    if SOURCE not in SOURCES:
        raise SystemExit(f"STITCH_BENCH_SWEEP={SOURCE!r}: expected one of {sorted(SOURCES)}")
    torch.set_num_threads(1)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                            cwd=REPO).stdout.strip()
    records, table_name = SOURCES[SOURCE]
    fixed = fixed_by_stitch(os.path.join(HERE, "results", records))
    pinned = guarded_only(os.path.join(HERE, "results", records))
    # STITCH_BENCH_ONLY=a,b: measure those rows again (in every suite that has them) and keep
    # the committed table's other rows. STITCH_BENCH_MISSING=1: only the models the committed
    # table has no row for (or whose timing failed). Kept rows keep the commit and date they
    # were measured at.
    only = os.environ.get("STITCH_BENCH_ONLY")
    path = os.path.join(HERE, "results", f"{table_name}.json")
    kept = _kept_rows(path) if os.environ.get("STITCH_BENCH_MISSING") or only else []
    redo = {(r["suite"], r["model"]) for r in kept if only and r["model"] in only.split(",")}
    have = {(r["suite"], r["model"]) for r in kept} - redo
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    from bench import HF_REPEATS

    order = {pair: i for i, pair in enumerate(fixed)}
    rows: list[dict] = []
    for suite, name in fixed:  # a process per row, the table written after each
        if (only and name not in only.split(",")) or (suite, name) in have:
            continue
        print(f"{suite}: {name}", flush=True)
        rows += [dict(r, commit=commit[:10], date=date) for r in hf_rows(
            PYTHONS.get(suite, sys.executable), [name], suite, SWEEP_BUILD.format(suite=suite),
            frozenset([name]) & pinned)]
        done = {(r["suite"], r["model"]) for r in rows}  # a row kept until measured again
        table = sorted([r for r in kept if (r["suite"], r["model"]) not in done] + rows,
                       key=lambda r: order.get((r["suite"], r["model"]), len(order)))
        result = {"meta": {"commit": commit, "torch": torch.__version__,
                           "cores": os.cpu_count(), "python": platform.python_version(),
                           "repeats": HF_REPEATS, "date": date}, "rows": table}
        write_results(result, table_name, markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
