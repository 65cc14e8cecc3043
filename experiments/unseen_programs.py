"""Short programs written the way people write model code, none from the sweep, the zoo, the
fuzzer or the forms generator (``experiments/unseen/batch*.py``), each exported as a new
user would: ``stitch.export(model, example, examples=[the others])``, then run against the
model on the examples and on held-out inputs.

Each program runs in its own process. Outcomes: ``exact`` (one program, the same outputs
and printed text on every input), ``narrowed`` (the program raises on an input the model
takes, and its report names those inputs as refused), ``refused`` (a StitchError naming
why), ``MISMATCH`` (different outputs or text, or a raise the report does not name) and
``CRASH`` (any other exception: an internal error).

    .venv/bin/python experiments/unseen_programs.py [--only batch2:refine,...]

writes experiments/results/unseen_programs.{json,md}.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import importlib
import io
import json
import os
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BATCHES = ("batch1", "batch2", "batch3")


def _plain(value):
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    return value


def _call(fn, inputs):
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            return fn(*[a.clone() for a in inputs]), out.getvalue()
    except Exception as e:  # noqa: BLE001 - compared, not swallowed
        return e, out.getvalue()


def run_one(batch: str, name: str) -> dict:
    """One program, in this process: its outcome and why."""
    import torch

    import stitch
    from stitch.errors import StitchError

    module = importlib.import_module(f"unseen.{batch}")
    for case, model, examples, held in module.cases():
        if case != name:
            continue
        reference = copy.deepcopy(model)
        start = time.perf_counter()
        row = {"program": f"{batch}:{case}"}
        try:
            program = stitch.export(model, examples[0],
                                    examples=[(e, {}) for e in examples[1:]])
        except StitchError as e:
            return {**row, "outcome": "refused", "kind": type(e).__name__,
                    "why": str(e).split("\n")[0][:300],
                    "seconds": round(time.perf_counter() - start, 1)}
        except Exception as e:  # noqa: BLE001 - counted as a crash
            return {**row, "outcome": "CRASH", "kind": type(e).__name__,
                    "why": traceback.format_exc()[-600:],
                    "seconds": round(time.perf_counter() - start, 1)}
        row["seconds"] = round(time.perf_counter() - start, 1)
        refused_sizes = "refused by the program" in str(program.report)
        bad, narrowed = [], []
        for inputs in list(examples) + list(held):
            want, said = _call(reference, inputs)
            got, printed = _call(program, inputs)
            if isinstance(got, Exception) and not isinstance(want, Exception):
                (narrowed if refused_sizes else bad).append(
                    f"the program raised {type(got).__name__}: {str(got)[:120]}")
                continue
            if isinstance(want, Exception) or isinstance(got, Exception):
                if type(want) is not type(got):
                    bad.append(f"raised {type(want).__name__} / {type(got).__name__}")
                continue
            try:
                assert type(got) is type(want), (type(got), type(want))
                torch.testing.assert_close(_plain(got), _plain(want), equal_nan=True)
            except AssertionError as e:
                bad.append(f"output: {str(e)[:160]}")
            if said != printed:
                bad.append(f"text: {said!r} / {printed!r}")
        outcome = "MISMATCH" if bad else "narrowed" if narrowed else "exact"
        return {**row, "outcome": outcome, "why": "; ".join(bad or narrowed)[:300]}
    raise SystemExit(f"no program {batch}:{name}")


def names() -> list[tuple[str, str]]:
    sys.path.insert(0, HERE)
    out = []
    for batch in BATCHES:
        module = importlib.import_module(f"unseen.{batch}")
        out += [(batch, case) for case, *_ in module.cases()]
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="", help="batch:name,... instead of all")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child process's program
    args = parser.parse_args()
    if args.one:
        sys.path.insert(0, HERE)
        print(json.dumps(run_one(*args.one.split(":"))))
        return 0
    chosen = [tuple(n.split(":")) for n in args.only.split(",") if n] or names()
    rows = []
    for batch, name in chosen:
        done = subprocess.run([sys.executable, __file__, "--one", f"{batch}:{name}"],
                              capture_output=True, text=True, timeout=900, cwd=REPO,
                              env=dict(os.environ, PYTHONPATH=REPO, OMP_NUM_THREADS="1"))
        lines = done.stdout.strip().splitlines()
        try:
            row = json.loads(lines[-1])
        except (IndexError, json.JSONDecodeError):
            row = {"program": f"{batch}:{name}", "outcome": "CRASH",
                   "why": done.stderr[-600:]}
        rows.append(row)
        print(f"{row['outcome']:9} {row['program']:28} {row.get('why', '')[:110]}", flush=True)
    _write(rows)
    return 0


def _write(rows: list[dict]) -> None:
    commit = subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], capture_output=True,
                            text=True, cwd=REPO).stdout.strip()
    import torch

    meta = {"commit": commit, "torch": torch.__version__,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    path = os.path.join(HERE, "results", "unseen_programs")
    with open(path + ".json", "w") as f:
        json.dump({"meta": meta, "counts": counts, "rows": rows}, f, indent=1)
    lines = [f"# Unseen programs ({meta['commit']}, torch {meta['torch']}, {meta['date']})", "",
             "Programs in `experiments/unseen/`, written the way people write model code; "
             "none from the sweep, the zoo, the fuzzer or the forms generator. "
             f"Outcomes: {', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}.", "",
             "| program | outcome | export s | why |", "| --- | --- | --- | --- |"]
    lines += [f"| {r['program']} | {r['outcome']} | {r.get('seconds', '')} | "
              f"{r.get('why', '').replace('|', '/')[:200]} |" for r in rows]
    with open(path + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
