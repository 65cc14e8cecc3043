"""Measure stitch on a sample of control-flow forms (tests/forms): exact, narrowed, refused,
mismatch, internal error, by construct and by reason.

    make forms FORMS_N=200 FORMS_SEED=0 [FORMS_WORKERS=2]
    python experiments/forms.py --n 200 --seed 0 [--only NAME ...] [--timeout 300] [--workers 2]

Writes ``results/forms.json`` (every form's record, the counts) and ``results/forms.md``
after each form, so a long run can be read while it goes. Outcomes are defined in
``tests/forms/run.py``. ``--workers N`` runs N forms at a time, each in a process of its
own (forms share no state but the files each writes in its own folder); the records are
kept in the sample's order.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import torch  # noqa: E402

from tests.forms.generate import CONSTRUCTS, all_forms, parse, sample  # noqa: E402
from tests.forms.run import run_form  # noqa: E402

RESULTS = os.path.join(REPO, "experiments", "results")
META = ("commit", "dirty", "date", "torch", "seed", "sample", "universe", "timeout_s", "minutes")
OUTCOMES = ("exact", "narrowed", "refused", "mismatch", "internal", "timeout", "invalid")


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                          check=False).stdout.strip()


def group(reason: str) -> str:
    """A reason with what varies between forms of one cause (the function, code) left out."""
    kind, _, text = reason.partition(": ")
    if "not possible: " in text:  # a guarded branch: why no cond, not where it was guarded
        text = "cond not possible: " + text.split("not possible: ", 1)[1]
    reason = kind + ": " + re.sub(r"<loc> in [\w.<>]+:", "<loc>:", text)
    reason = re.sub(r"`([^`]*)`", lambda m: m[0] if len(m[1]) <= 20 else "`<code>`", reason)
    return re.split(r"[;,] | \(", reason)[0][:120]  # the cause, not its explanation


def summary(records: list[dict]) -> dict:
    by_construct: dict[str, Counter] = defaultdict(Counter)
    by_position: dict[str, Counter] = defaultdict(Counter)
    reasons: dict[str, Counter] = defaultdict(Counter)
    example: dict[tuple, str] = {}
    for r in records:
        by_construct[r["construct"]][r["outcome"]] += 1
        by_position[r["position"]][r["outcome"]] += 1
        if r["outcome"] in ("narrowed", "refused", "internal", "mismatch"):
            key = group(r["reason"]) + (f"  [{r['where']}]" if r["where"] else "") + \
                ("  (no file:line)" if r["outcome"] == "refused" and not r["located"] else "")
            reasons[r["outcome"]][key] += 1
            example.setdefault((r["outcome"], key), r["name"])
    return {
        "total": len(records),
        "counts": dict(Counter(r["outcome"] for r in records)),
        "refused_not_located": sum(r["outcome"] == "refused" and not r["located"]
                                   for r in records),
        "sides_not_covered": sum(not r["sides_covered"] for r in records),
        "refused_by_type": dict(Counter(r["error_type"] for r in records
                                        if r["outcome"] == "refused").most_common()),
        "by_construct": {k: dict(v) for k, v in by_construct.items()},
        "by_position": {k: dict(v) for k, v in by_position.items()},
        "reasons": {o: [{"count": n, "reason": k, "example": example[(o, k)]}
                        for k, n in c.most_common()] for o, c in reasons.items()},
    }


def markdown(meta: dict, summ: dict) -> str:
    lines = [f"# stitch on control-flow forms ({summ['total']} forms)", "",
             f"commit {meta['commit']}{' (with uncommitted changes)' if meta['dirty'] else ''}, "
             f"{meta['date']}, torch {meta['torch']}, seed "
             f"{meta['seed']}, {meta['sample']} sampled of {meta['universe']} forms; "
             f"{meta['minutes']} min. Outcomes: tests/forms/run.py.", "",
             "| outcome | forms |", "| --- | ---: |"]
    lines += [f"| {o} | {summ['counts'].get(o, 0)} |" for o in OUTCOMES]
    lines += ["", "Refused by error class: " + ", ".join(
        f"{k} {v}" for k, v in summ["refused_by_type"].items()) + "."]
    lines += ["", f"Refusals naming no line of the form: {summ['refused_not_located']}. "
              f"Forms whose tests did not all take both sides: {summ['sides_not_covered']}.", ""]
    for title, table, keys in (("construct", summ["by_construct"], CONSTRUCTS),
                               ("position", summ["by_position"], sorted(summ["by_position"]))):
        lines += [f"## by {title}", "", f"| {title} | " + " | ".join(OUTCOMES) + " |",
                  "| --- |" + " ---: |" * len(OUTCOMES)]
        lines += [f"| {k} | " + " | ".join(str(table.get(k, {}).get(o, 0)) for o in OUTCOMES)
                  + " |" for k in keys if k in table]
        lines.append("")
    for outcome in ("mismatch", "internal", "refused", "narrowed"):
        rows = summ["reasons"].get(outcome, [])
        if not rows:
            continue
        lines += [f"## {outcome}: by reason", "", "| forms | reason | e.g. |", "| ---: | --- | --- |"]
        lines += [f"| {r['count']} | {r['reason'].replace('|', '/')} | `{r['example']}` |"
                  for r in rows]
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=int, default=300, help="seconds per form")
    parser.add_argument("--only", nargs="*", help="form names instead of a sample")
    parser.add_argument("--workers", type=int, default=1, help="forms run at a time")
    parser.add_argument("--out", default=os.path.join(RESULTS, "forms"),
                        help="path stem of the .json and .md written")
    parser.add_argument("--render", action="store_true",
                        help="only write the .md again from the .json (no form is run)")
    args = parser.parse_args()
    if args.render:
        with open(args.out + ".json") as f:
            data = json.load(f)
        meta = {k: data[k] for k in META}
        with open(args.out + ".md", "w") as f:
            f.write(markdown(meta, summary(data["forms"])) + "\n")
        return
    forms = [parse(n) for n in args.only] if args.only else sample(args.n, args.seed)
    meta = {"commit": _git("rev-parse", "HEAD"),
            "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "torch": torch.__version__, "seed": args.seed, "sample": len(forms),
            "universe": len(all_forms()), "timeout_s": args.timeout}
    started = time.time()
    records: list[dict | None] = [None] * len(forms)
    with _results(forms, args.timeout, args.workers) as results:
        for done, (i, record) in enumerate(results, start=1):
            records[i] = record
            print(f"[{done}/{len(forms)}] {record['outcome']:<8} {record['seconds']:>6.1f}s "
                  f"{forms[i].name}  {record['reason'][:100]}", file=sys.stderr, flush=True)
            meta["minutes"] = round((time.time() - started) / 60, 1)
            kept = [r for r in records if r is not None]
            summ = summary(kept)
            with open(args.out + ".json", "w") as f:
                json.dump({**meta, **summ, "forms": kept}, f, indent=1)
            with open(args.out + ".md", "w") as f:
                f.write(markdown(meta, summ) + "\n")


def _run_one(job: tuple[int, str, int, str]) -> tuple[int, dict]:
    i, name, timeout, base = job
    directory = os.path.join(base, str(os.getpid()))  # each process's own module files
    os.makedirs(directory, exist_ok=True)
    return i, run_form(parse(name), directory, timeout=timeout).as_dict()


class _results:
    """(index, record) of each form as it finishes: in this process, or in ``workers``
    processes; the forms' folders removed afterwards."""

    def __init__(self, forms, timeout: int, workers: int) -> None:
        self.base = tempfile.mkdtemp(prefix="stitch-forms-")
        self.jobs = [(i, f.name, timeout, self.base) for i, f in enumerate(forms)]
        self.workers = workers
        self.pool = None

    def __enter__(self):
        if self.workers <= 1:
            return map(_run_one, self.jobs)
        # fork: each worker starts from this process's imports; one form per task
        self.pool = multiprocessing.get_context("fork").Pool(self.workers, maxtasksperchild=25)
        return self.pool.imap_unordered(_run_one, self.jobs)

    def __exit__(self, *_exc) -> None:
        if self.pool is not None:
            self.pool.terminate()
        shutil.rmtree(self.base, ignore_errors=True)

if __name__ == "__main__":
    main()
