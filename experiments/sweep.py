"""``make sweep``: every model a library can build, one subprocess each, through stitch.

Suites: ``hf`` (transformers in .venv, every architecture of ``MODEL_MAPPING_NAMES``),
``hf452`` (transformers 4.52.4 in .venv-hf452, same builder), ``torchvision`` (detection,
instance segmentation, keypoints, video, optical flow), and the library suites of
``sweep_libs.py`` (``diffusers``, ``timm``, ``ultralytics``, ``pyg``, ``kornia``, in .venv
with the ``sweep`` extra). Each model runs in its own process
(``nice -n 15``, one thread, a time limit); its record is cached in
``results/sweep_cache/<suite>/<model>.json`` with the commit and dirty flag it ran at, so the
sweep resumes where it stopped. Writes ``results/sweep.json`` and ``results/sweep.md`` after
every model. See docs/sweep.md.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time

import sweep_report

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")
CACHE = os.path.join(RESULTS, "sweep_cache")
PYTHONS = {"hf": os.path.join(REPO, ".venv", "bin", "python"),
           "hf452": os.path.join(REPO, ".venv-hf452", "bin", "python"),
           **{suite: os.path.join(REPO, ".venv", "bin", "python") for suite in
              ("torchvision", "diffusers", "timm", "ultralytics", "pyg", "kornia")}}
LIST_CODE = """
import json, sys, torch
sys.path.insert(0, {here!r})
import sweep_libs
if {suite!r} in sweep_libs.SUITES:
    m, versions = sweep_libs.module({suite!r}), sweep_libs.versions({suite!r})
elif {suite!r} == "torchvision":
    import torchvision, sweep_vision as m
    versions = f"torch {{torch.__version__}}, torchvision {{torchvision.__version__}}"
else:
    import transformers, sweep_hf as m
    versions = f"torch {{torch.__version__}}, transformers {{transformers.__version__}}"
print("LIST" + json.dumps({{"versions": versions, "names": list(m.architectures())}}))
"""


def _git(*a: str) -> str:
    return subprocess.run(["git", *a], capture_output=True, text=True, cwd=REPO).stdout


def git_state() -> tuple[str, bool]:
    """(HEAD commit, whether ``git status --porcelain`` lists anything)."""
    return _git("rev-parse", "HEAD").strip(), bool(_git("status", "--porcelain").strip())


def code_state() -> str:
    """A short hash of the uncommitted changes to stitch/ and capture/ ("clean" if none):
    others edit the tree while the sweep runs, so equal commits may run different code."""
    import hashlib

    diff = _git("diff", "HEAD", "--", "stitch", "capture")
    new = _git("ls-files", "--others", "--exclude-standard", "--", "stitch", "capture")
    for path in new.split():
        with open(os.path.join(REPO, path), "rb") as f:
            diff += hashlib.sha1(f.read()).hexdigest()
    return hashlib.sha1(diff.encode()).hexdigest()[:10] if diff else "clean"


def listing(suite: str) -> dict:
    done = subprocess.run([PYTHONS[suite], "-c", LIST_CODE.format(here=HERE, suite=suite)],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("LIST")), None)
    if line is None:
        raise SystemExit(f"cannot list {suite} models: {done.stderr[-500:]}")
    return json.loads(line[4:])


def cached(suite: str, name: str, commit: str, reuse: str) -> dict | None:
    path = os.path.join(CACHE, suite, f"{name}.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        rec = json.load(f)
    return rec if reuse == "any" or rec.get("commit") == commit else None


def run_one(suite: str, name: str, limit_s: float) -> dict:
    """Runs the worker under nice, kills its process group at the limit."""
    os.makedirs(os.path.join(CACHE, suite), exist_ok=True)
    out = os.path.join(CACHE, suite, f"{name}.partial")
    if os.path.exists(out):
        os.remove(out)
    commit, dirty = git_state()
    state = code_state()
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONPATH=REPO,
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               TRANSFORMERS_VERBOSITY="error")
    cmd = ["nice", "-n", "15", PYTHONS[suite], os.path.join(HERE, "sweep_worker.py"),
           suite, name, out]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    timed_out = False
    try:
        _, err = proc.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
    rec = {"suite": suite, "model": name, "stage": "start", "seconds": {}}
    if os.path.exists(out):
        with open(out) as f:
            rec = json.load(f)
        os.remove(out)
    if code_state() != state or git_state()[0] != commit:
        rec["code_changed_during_run"] = True  # a crash then may be a tree caught mid-edit
    rec.update(commit=commit, dirty=dirty, stitch_changes=state, wall_s=round(time.perf_counter() - start, 1),
               finished_at=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    if timed_out:
        rec["timeout"] = limit_s
    elif rec.get("stage") != "done":
        rec["died"] = f"exit {proc.returncode}"
        rec["stderr_tail"] = (err or "")[-1500:]
    if rec.get("harness_error") and rec.get("stage") == "start":
        return rec  # stitch failed to import (a tree mid-edit): not cached, retried next run
    with open(os.path.join(CACHE, suite, f"{name}.json"), "w") as f:
        json.dump(rec, f, indent=1, default=str)
    return rec


def write(results: dict, limit_s: float) -> None:
    commits = sorted({r.get("commit", "?")[:10] for s in results.values() for r in s["records"]})
    result = {"meta": {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                       "commits": commits, "limit_s": limit_s,
                       "dirty": sorted({str(r.get("dirty")) for s in results.values()
                                        for r in s["records"]})},
              "suites": {}}
    for suite, data in results.items():
        data["summary"] = sweep_report.summarize(data["records"])
        result["suites"][suite] = data
    with open(os.path.join(RESULTS, "sweep.json"), "w") as f:
        json.dump(result, f, indent=1, default=str)
    with open(os.path.join(RESULTS, "sweep.md"), "w") as f:
        f.write(sweep_report.markdown(result))


def _deadline(until: str) -> float:
    """``HH:MM`` UTC as a time after now: the next such minute (past midnight if needed; a
    plain string comparison stopped a run started at 23:59 with --until 00:14 at once)."""
    import datetime as dt

    now = dt.datetime.now(dt.UTC)
    hours, minutes = (int(v) for v in until.split(":"))
    at = now.replace(hour=hours, minute=minutes, second=0, microsecond=0)
    return (at if at > now else at + dt.timedelta(days=1)).timestamp()


def main(argv: list[str] | None = None) -> int:
    env = os.environ.get
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--suites", default=env("SWEEP_SUITES", "hf"),
                   help="comma list of hf, hf452, torchvision, diffusers, timm, "
                   "ultralytics, pyg, kornia (SWEEP_SUITES)")
    p.add_argument("--only", default=env("SWEEP_ONLY", ""),
                   help="comma list of model names to run (SWEEP_ONLY); default all")
    p.add_argument("--limit-s", type=float, default=float(env("SWEEP_LIMIT_S", "900")))
    p.add_argument("--until", default=env("SWEEP_UNTIL", ""),
                   help="HH:MM UTC: start no model after this (SWEEP_UNTIL)")
    p.add_argument("--max-models", type=int, default=int(env("SWEEP_MAX", "0")),
                   help="run at most this many uncached models (SWEEP_MAX); 0: no limit")
    p.add_argument("--reuse", choices=["commit", "any"], default=env("SWEEP_REUSE", "commit"),
                   help="reuse cached records of this commit only, or of any (SWEEP_REUSE)")
    p.add_argument("--report-only", action="store_true", help="rewrite sweep.json/md from "
                   "the cache, run nothing")
    a = p.parse_args(argv)
    only = [n for n in a.only.split(",") if n]
    commit, _ = git_state()
    results: dict = {}
    fresh = 0
    deadline = _deadline(a.until) if a.until else None
    for suite in [s for s in a.suites.split(",") if s]:
        found = listing(suite)
        unknown = sorted(set(only) - set(found["names"]))
        if unknown and len(a.suites.split(",")) == 1:
            print(f"{suite}: unknown models {unknown}", file=sys.stderr)
        names = [n for n in found["names"] if not only or n in only]
        data = results[suite] = {"versions": found["versions"],
                                 "architectures": len(found["names"]), "records": []}
        for name in names:
            rec = cached(suite, name, commit, "any" if a.report_only else a.reuse)
            stop = (deadline is not None and time.time() >= deadline
                    or a.max_models and fresh >= a.max_models)
            if rec is None and not a.report_only and not stop:
                print(f"[{time.strftime('%H:%M:%S')}] {suite} {name} ...", end=" ", flush=True)
                rec = run_one(suite, name, a.limit_s)
                fresh += 1
                v = sweep_report.classify(rec)
                print(f"{v.outcome.value} {rec['wall_s']}s {v.reason[:100]}", flush=True)
            if rec is not None:
                data["records"].append(rec)
            if rec is not None and "wall_s" in rec and fresh and rec is data["records"][-1]:
                write(results, a.limit_s)
    write(results, a.limit_s)
    for suite, data in results.items():
        s = data["summary"]
        print(f"{suite}: {s['records']} of {data['architectures']} run; {s['by_outcome']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
