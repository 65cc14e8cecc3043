"""GraphMend's rule fixtures, ported to plain Python/PyTorch, measured with stitch.

GraphMend (a peer project, implemented as passes of the Jac compiler) keeps one fixture per
rewrite rule in the public repository ``savini98/jaseci``, folder
``jac/tests/compiler/passes/main/fixtures/graphmend/`` (33 files, ``.jac`` and ``.py``).
The package ``experiments/peer/`` holds a port of each, written anew in Python: the same
data-dependent branches, prints, logger calls, raises, ``.item()`` reads, helper functions,
attribute writes and decorators as the fixture, so the graph-break pattern is the one
GraphMend's tests exercise. It has one module per family: ``peer/guards.py`` (``hasattr``
and validation guards), ``peer/where.py`` (data-dependent branches), ``peer/effects.py``
(prints, logger calls, raises), with ``peer/common.py`` for the helpers they share; its
``__init__`` builds ``FIXTURES``. This module is the runner.

How the ports map the fixtures:

- A fixture is a ``@torch.compile`` function ``f(...)``; its port is an ``nn.Module`` whose
  ``forward`` takes the same parameters and holds the same body, so ``forward`` is the
  compiled entry, as ``f`` was. Functions the fixture calls stay module-level functions.
- Fixtures whose first parameter is ``self_obj`` (the Phi-4 longrope ``register_buffer``
  pattern of GraphMend's paper, Fig. 4) take a rotary-embedding-like object; the port makes
  that object the module itself (``self``), with the attributes the body reads set in
  ``__init__`` (see ``peer/common.py``).
- Names a fixture uses but never defines (``foo``/``bar``, ``combine``, ``process``,
  ``logger``) are defined in the port modules; each one's docstring says what it was given
  to do.
- ``region_deco_factory.jac`` is not a model: it is the decorator factory that
  ``region_deco_entry.jac`` imports, ported as ``phase_wrap`` in ``peer/effects.py``.

``FIXTURES`` lists ``(name, factory)``; ``factory()`` returns ``(model, args, kwargs,
examples)`` with the model in eval mode, built after ``torch.manual_seed(0)``. Where the
fixture branches on data, the first input and the examples together take both sides.

Run (from the repository root)::

    PYTHONPATH=. .venv/bin/python experiments/peer_fixtures.py            # every fixture
    PYTHONPATH=. .venv/bin/python experiments/peer_fixtures.py where_return cond_assign
    PYTHONPATH=. .venv/bin/python experiments/peer_fixtures.py --jsonl out.jsonl

Each fixture runs in a process of its own (``--one NAME``, 300 s limit): eager check of the
port, ``torch._dynamo.explain`` (graphs and breaks before; also the graph count a counting
backend receives, the metric of the peer's own tests), plain ``torch.export.export``
(non-strict), then ``stitch.export`` and, when it returns a program, a comparison of the
program's outputs (and printed/logged/warned text) with the eager model's. One JSON line
per fixture, then a summary table.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import logging
import os
import subprocess
import sys
import time
import traceback
import warnings

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from peer import FIXTURES  # noqa: E402
from peer.guards import _one_false  # noqa: E402

RESULT_MARK = "@@PEER-FIXTURE-RESULT "
TIMEOUT_S = 300


# =====================================================================================
# What the harness needs to know about some entries
# =====================================================================================

# Fixtures whose forward raises on every input, on purpose: eager raising this is the port
# working, and the program should raise it too.
RAISES_ALWAYS = {
    "logger_forward_hook_raises": (ValueError, "GM-BOOM"),
    "side_effect_raises": (ValueError, "GM-SE-BOOM"),
}


def _failing_guard_inputs():
    """Inputs that fail a fixture's validation guard (not examples: a check, after export,
    that the program raises the model's exception as eager does)."""
    torch.manual_seed(1)
    x = torch.randn(4, 8)
    pos = x.abs() + 0.1
    return {
        "py_val_guard": ((x, _one_false()), {}),
        "val_guard_all": ((x, _one_false()), {}),
        "val_guard": ((x, x + 1.0), {}),
        "nested_guard_in_branch": ((pos, pos + 1.0), {}),  # branch taken, x != y
    }


# =====================================================================================
# Harness
# =====================================================================================

def _short(e: BaseException, n: int = 300) -> str:
    return f"{type(e).__name__}: {str(e).strip()}"[: n + len(type(e).__name__) + 2]


def _tail(e: BaseException, lines: int = 6) -> str:
    tb = traceback.format_exception(type(e), e, e.__traceback__)
    return "".join(tb).strip().splitlines()[-lines:]


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(level=0)
        self.messages = []

    def emit(self, record):
        self.messages.append(f"{record.name}:{record.levelname}:{record.getMessage()}")


def _observe(fn, args, kwargs):
    """Call ``fn`` on copies of the inputs; what it returned or raised, and the text it
    printed, logged and warned."""
    args, kwargs = copy.deepcopy(args), copy.deepcopy(kwargs)
    out, exc = None, None
    records = _Records()
    root = logging.getLogger()
    root.addHandler(records)
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                out = fn(*args, **kwargs)
            except Exception as e:  # noqa: BLE001 - recorded and compared
                exc = e
    finally:
        root.removeHandler(records)
    return {"out": out, "exc": exc, "stdout": buf.getvalue(), "logs": records.messages,
            "warnings": [str(w.message) for w in caught]}


def _same_result(eager, got) -> tuple[bool, str]:
    if eager["exc"] is not None or got["exc"] is not None:
        if eager["exc"] is None or got["exc"] is None:
            which = eager["exc"] or got["exc"]
            side = "eager" if eager["exc"] is not None else "program"
            return False, f"only {side} raised: {_short(which, 200)}"
        same = (type(eager["exc"]) is type(got["exc"])
                and str(eager["exc"]) == str(got["exc"]))
        return same, ("" if same else f"eager {_short(eager['exc'], 150)} vs program "
                                      f"{_short(got['exc'], 150)}")
    try:
        torch.testing.assert_close(got["out"], eager["out"])
        return True, ""
    except Exception as e:  # noqa: BLE001
        return False, _short(e, 300)


def _same_text(eager, got) -> tuple[bool, str]:
    diffs = [k for k in ("stdout", "logs", "warnings") if eager[k] != got[k]]
    if not diffs:
        return True, ""
    k = diffs[0]
    return False, f"{k}: eager {eager[k]!r:.150} vs program {got[k]!r:.150}"


def run_one(name: str) -> dict:
    import stitch

    factory = dict(FIXTURES)[name]
    rec: dict = {"name": name}
    t0 = time.time()
    model, args, kwargs, examples = factory()

    # 1. the port runs eagerly (on copies), on the first input and every example
    expected_exc = RAISES_ALWAYS.get(name)
    problems = []
    for i, (a, k) in enumerate([(args, kwargs), *examples]):
        seen = _observe(copy.deepcopy(model), a, k)
        if expected_exc is not None:
            e = seen["exc"]
            if not (isinstance(e, expected_exc[0]) and expected_exc[1] in str(e)):
                problems.append(f"input {i}: expected {expected_exc[0].__name__}, got "
                                f"{_short(e, 200) if e else 'no exception'}")
        elif seen["exc"] is not None:
            problems.append(f"input {i}: {_short(seen['exc'], 300)}")
    rec["eager"] = ("port broken: " + "; ".join(problems)) if problems else (
        f"ok (raises {expected_exc[0].__name__} as the fixture does)" if expected_exc else "ok")

    # 2. graphs and breaks under torch.compile
    try:
        torch._dynamo.reset()
        with contextlib.redirect_stdout(io.StringIO()):
            ex = torch._dynamo.explain(copy.deepcopy(model))(
                *copy.deepcopy(args), **copy.deepcopy(kwargs))
        rec["graphs_before"] = ex.graph_count
        rec["breaks_before"] = ex.graph_break_count
        rec["break_reasons"] = [str(r.reason).splitlines()[0][:160] for r in ex.break_reasons]
    except Exception as e:  # noqa: BLE001
        rec["graphs_before"] = rec["breaks_before"] = None
        rec["explain_error"] = _short(e, 300)
    # the peer's own metric: graphs a counting backend receives for one call (its tests
    # note that explain() under-reports for small functions)
    graphs: list = []

    def counting_backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            torch.compile(copy.deepcopy(model), backend=counting_backend)(
                *copy.deepcopy(args), **copy.deepcopy(kwargs))
    except Exception as e:  # noqa: BLE001 - the raising fixtures raise here too
        rec["backend_call_error"] = _short(e, 200)
    rec["graphs_backend"] = len(graphs)
    torch._dynamo.reset()

    # 3. plain torch.export (non-strict)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            torch.export.export(copy.deepcopy(model), copy.deepcopy(args),
                                copy.deepcopy(kwargs), strict=False)
        rec["torch_export_ok"] = True
    except Exception as e:  # noqa: BLE001
        rec["torch_export_ok"] = False
        rec["torch_export_error"] = _short(e, 300)

    # 4. stitch.export, then the program against the eager model
    reference = copy.deepcopy(model)  # the state stitch starts from
    t1 = time.time()
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            program = stitch.export(model, args, kwargs, examples=examples)
    except stitch.StitchError as e:
        rec["stitch"] = "refused: " + _short(e, 300)
        rec["stitch_detail"] = str(e)[:2000]
        program = None
    except Exception as e:  # noqa: BLE001
        if any("raised by the model itself" in n for n in getattr(e, "__notes__", ())):
            # the model fails on its own examples: its exception, passed through with a note
            rec["stitch"] = f"model raises: {type(e).__name__}: {str(e)[:120]} (its own)"
        else:
            rec["stitch"] = "crash: " + " | ".join(_tail(e))
        program = None
    rec["stitch_seconds"] = round(time.time() - t1, 1)
    if program is not None:
        rec["stitch"] = "one graph"
        rec["program_type"] = type(program).__name__
        report = getattr(program, "report", None)
        rec["graphs_after"] = getattr(report, "graphs_after", None)
        if report is not None:
            rec["decisions"] = [f"{d.action.value}: {d.function} {d.reason[:90]}"
                                for d in report.decisions]
            rec["notes"] = [n[:200] for n in report.notes]
        eager = _observe(reference, args, kwargs)
        got = _observe(program, args, kwargs)
        ok, why = _same_result(eager, got)
        rec["outputs_match"] = "pass" if ok else f"fail: {why}"
        ok, why = _same_text(eager, got)
        rec["text_match"] = "pass" if ok else f"fail: {why}"
        failing = _failing_guard_inputs().get(name)
        if failing is not None:
            eager_f = _observe(copy.deepcopy(reference), *failing)
            got_f = _observe(program, *failing)
            ok, why = _same_result(eager_f, got_f)
            rec["failing_guard_input"] = "pass" if ok else f"fail: {why}"
    rec["seconds"] = round(time.time() - t0, 1)
    return rec


def _summary(records: list[dict]) -> str:
    from tabulate import tabulate

    rows = []
    for r in records:
        outcome = r.get("stitch", "?")
        if outcome == "one graph":
            outcome += (f" (graphs_after={r.get('graphs_after')}, outputs "
                        f"{r.get('outputs_match', '?')[:4]}, text {r.get('text_match', '?')[:4]})")
        elif outcome.startswith("crash"):
            outcome = "crash: " + outcome.rsplit(" | ", 1)[-1].strip()
        else:
            outcome = outcome.split("\n")[0]
        rows.append([r["name"], r.get("graphs_before"), r.get("breaks_before"),
                     r.get("graphs_backend"), r.get("torch_export_ok"), outcome[:100],
                     "" if r.get("eager", "ok").startswith("ok") else r.get("eager", "")[:40]])
    return tabulate(rows, headers=["fixture", "graphs before", "breaks before",
                                   "graphs (counting backend)", "torch.export ok",
                                   "stitch outcome", "eager"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="fixtures to run (default: all)")
    ap.add_argument("--one", help="run one fixture in this process (used by the driver)")
    ap.add_argument("--jsonl", help="also write the JSON lines to this file")
    opts = ap.parse_args(argv)

    if opts.one:
        warnings.filterwarnings("ignore")
        rec = run_one(opts.one)
        sys.stdout.flush()
        sys.__stdout__.write(RESULT_MARK + json.dumps(rec) + "\n")
        return 0

    known = [n for n, _ in FIXTURES]
    names = opts.names or known
    unknown = [n for n in names if n not in known]
    if unknown:
        ap.error(f"unknown fixtures: {unknown}; known: {known}")
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    records = []
    sink = open(opts.jsonl, "w") if opts.jsonl else None  # noqa: SIM115
    for name in names:
        t0 = time.time()
        try:
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", name],
                                  cwd=REPO, env=env, capture_output=True, text=True,
                                  timeout=TIMEOUT_S)
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT_MARK)]
            if lines:
                rec = json.loads(lines[-1][len(RESULT_MARK):])
            else:
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-6:]
                rec = {"name": name, "stitch": f"crash: worker exited {proc.returncode}: "
                                               + " | ".join(tail)}
        except subprocess.TimeoutExpired:
            rec = {"name": name, "stitch": f"crash: timeout after {TIMEOUT_S} s"}
        rec.setdefault("seconds", round(time.time() - t0, 1))
        records.append(rec)
        line = json.dumps(rec)
        print(line, flush=True)
        if sink:
            sink.write(line + "\n")
            sink.flush()
    if sink:
        sink.close()
    print()
    print(_summary(records))
    one = sum(r.get("stitch") == "one graph" for r in records)
    print(f"\n{one} of {len(records)} fixtures: one graph")
    return 0


if __name__ == "__main__":
    sys.exit(main())
