"""What stitch does on a CUDA GPU: run on a machine with one (the device tool lends one to some
sessions). Not part of ``make test`` (CI has no GPU).

Sections, each recorded in ``<out>/gpu_check.json`` whatever happens to the others:
  env       torch, CUDA, GPU, whether torch_tensorrt imports
  zoo       every zoo case moved to CUDA: stitch.export, then each backend with and without
            CUDA graphs checked against the eager model on every example, then
            stitch.compile(backend="auto") and its decision
  latency   per zoo row: eager model, torch.compile of the original (graph breaks and all),
            the stitched graph on each backend/CUDA-graph variant; medians of interleaved runs
  artifact  the demo on CUDA: compile auto, save, load in a fresh process, compare
  check     a data-dependent assert failing on CUDA (each backend, in a subprocess each): does
            the model's exception come back, and does the CUDA context survive it?
            (With the check in the graph, Settings.checks="graph", it did not: a device-side
            assert, every later CUDA call failing; seen on an H100, torch 2.11.)

Usage: python experiments/gpu_check.py OUT_DIR [case ...]
Environment: GPU_CHECK_SKIP (sections, "auto", "compile_original" to leave out, comma-separated),
GPU_CHECK_BACKENDS (default eager,inductor,aoti,onnxruntime; the AOTInductor probe runs only
with aoti), GPU_CHECK_ARTIFACT_BACKEND (what the artifact section compiles; default auto).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

import torch
import torch.utils._pytree as pytree

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)

RESULT: dict = {}
BACKENDS = os.environ.get("GPU_CHECK_BACKENDS", "eager,inductor,aoti,onnxruntime").split(",")
SKIP = os.environ.get("GPU_CHECK_SKIP", "").split(",")  # e.g. "check": run on its own


def _save(out: str) -> None:
    with open(os.path.join(out, "gpu_check.json"), "w") as f:
        json.dump(RESULT, f, indent=1, default=str)


def _err(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e)[:600]}"


def _cuda(tree):
    return pytree.tree_map(lambda t: t.cuda() if isinstance(t, torch.Tensor) else t, tree)


def _close(a, b) -> float:
    worst = 0.0
    la, lb = pytree.tree_leaves(a), pytree.tree_leaves(b)
    assert len(la) == len(lb), f"{len(la)} vs {len(lb)} outputs"
    for x, y in zip(la, lb, strict=True):
        if isinstance(x, torch.Tensor):
            torch.testing.assert_close(y.detach().cpu(), x.detach().cpu())
            if x.numel() and x.is_floating_point():
                worst = max(worst, (y.detach().cpu().double() - x.detach().cpu().double())
                            .abs().max().item())
    return worst


def env() -> dict:
    info = {"torch": torch.__version__, "cuda": torch.version.cuda,
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "python": sys.version.split()[0]}
    if "aoti" in BACKENDS:  # the probe compiles for over a minute
        from stitch.lower.aoti_probe import aoti_load_failure

        info["aoti_cuda"] = aoti_load_failure("cuda") or "loads"
    try:
        import onnxruntime as ort
        info["onnxruntime"] = ort.__version__
        info["onnxruntime_providers"] = ort.get_available_providers()
    except Exception as e:  # noqa: BLE001
        info["onnxruntime"] = f"not importable: {_err(e)}"
    try:
        import torch_tensorrt  # noqa: F401
        info["torch_tensorrt"] = torch_tensorrt.__version__
    except Exception as e:  # noqa: BLE001
        info["torch_tensorrt"] = f"not importable: {_err(e)}"
    return info


def _time(fns: dict, inputs: list, repeats: int = 100) -> dict:
    import random

    times = {k: [] for k in fns}
    names = list(fns)
    shuffle = random.Random(0).shuffle
    with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()):
        for _ in range(5):
            for fn in fns.values():
                for a, k in inputs:
                    fn(*a, **k)
        torch.cuda.synchronize()
        for _ in range(repeats):
            shuffle(names)
            for name in names:
                start = time.perf_counter()
                for a, k in inputs:
                    fns[name](*a, **k)
                torch.cuda.synchronize()
                times[name].append((time.perf_counter() - start) * 1e3 / len(inputs))
    out = {}
    for k, v in times.items():
        q = statistics.quantiles(v, n=4)
        out[k] = {"median_ms": round(statistics.median(v), 4), "iqr_ms": round(q[2] - q[0], 4)}
    if "eager_model" in out:  # ratios from the same interleaved run: < 1 is faster than eager
        base = out["eager_model"]["median_ms"]
        for k in out:
            out[k]["vs_eager"] = round(out[k]["median_ms"] / base, 3)
    return out


def zoo_case(name: str) -> dict:
    import stitch
    from tests.zoo import make

    row: dict = {"case": name}
    model, args, kwargs, examples = make(name)
    model = model.cuda()
    inputs = [(_cuda(args), _cuda(kwargs))] + [(_cuda(a), _cuda(k)) for a, k in examples]
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            program = stitch.export(model, *inputs[0], examples=inputs[1:])
    except Exception as e:  # noqa: BLE001
        row["export"] = _err(e)
        return row
    row["export_s"] = round(time.perf_counter() - start, 2)
    row["breaks_after"] = program.report.breaks_after
    row["graph_ops"] = dict(program.report.graph_ops)
    fns = {"eager_model": model}
    try:
        if "compile_original" not in SKIP:
            fns["compile_original"] = torch.compile(model)
    except Exception as e:  # noqa: BLE001
        row["compile_original"] = _err(e)
    variants = {}
    for backend in BACKENDS:
        for graphs in (False, True):
            label = backend + ("+cudagraphs" if graphs else "")
            try:
                compiled = stitch.compile(program, backend, cudagraphs=graphs)
                worst = 0.0
                fresh = make(name)[0].cuda()  # stateful models: compare from the same state
                fresh.load_state_dict(model.state_dict())
                for a, k in inputs:
                    with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()):
                        worst = max(worst, _close(fresh(*a, **k), compiled(*a, **k)))
                variants[label] = {"matches_eager": True, "max_abs_error": worst}
                if backend == "onnxruntime":  # which ONNX Runtime provider ran it
                    run = compiled._built.run
                    variants[label]["provider"] = getattr(run, "provider", "?")
                    if getattr(run, "cuda_fallback", None):
                        variants[label]["cuda_fallback"] = run.cuda_fallback
                fns["stitched_" + label] = compiled
            except Exception as e:  # noqa: BLE001
                variants[label] = {"error": _err(e)}
    row["variants"] = variants
    try:
        if "auto" not in SKIP:
            auto = stitch.compile(program, "auto")
            row["auto"] = auto.decision.to_json()
            fns["stitched_auto"] = auto
    except Exception as e:  # noqa: BLE001
        row["auto"] = _err(e)
    try:
        row["latency"] = _time(fns, inputs)
    except Exception as e:  # noqa: BLE001
        row["latency"] = _err(e)
    return row


LOAD_AND_RUN = """
import sys, torch, json
sys.path.insert(0, {repo!r})
import stitch
from stitch.demo_model import make_demo
model, args, kwargs, examples = make_demo()
model = model.cuda()
loaded = stitch.load({path!r})
worst = 0.0
with torch.no_grad():
    for a, k in [(args, kwargs)] + examples:
        a = tuple(t.cuda() for t in a)
        got, want = loaded(*a, **k), model(*a, **k)
        assert got.is_cuda, got.device
        worst = max(worst, (got - want).abs().max().item())
print("LOADED", json.dumps({{"chosen": (loaded.deployment or {{}}).get("chosen"),
                            "max_abs_error": worst, "runner": type(loaded._runner).__name__,
                            "provider": getattr(loaded._runner, "provider", None)}}))
"""


def artifact() -> dict:
    """Save the auto-compiled demo as an AOTInductor package, else (AOTI unavailable in this
    torch) as ONNX, load it in a fresh process and compare on CUDA inputs."""
    import stitch
    from stitch.demo_model import make_demo
    from stitch.lower.backends import BackendUnavailable

    model, args, kwargs, examples = make_demo()
    model = model.cuda()
    args = _cuda(args)
    examples = [(_cuda(a), k) for a, k in examples]
    program = stitch.export(model, args, kwargs, examples=examples)
    backend = os.environ.get("GPU_CHECK_ARTIFACT_BACKEND", "auto")
    compiled = stitch.compile(program, backend)
    result: dict = {"decision": str(compiled.decision)}
    # a .pt2 of an onnxruntime deployment compiles AOTInductor first (minutes): only .onnx
    for suffix in (".onnx",) if backend == "onnxruntime" else (".pt2", ".onnx"):
        path = os.path.join(tempfile.mkdtemp(), "demo_cuda" + suffix)
        try:
            compiled.save(path)
        except BackendUnavailable as e:
            result[suffix] = f"not saved: {_err(e)}"
            continue
        done = subprocess.run([sys.executable, "-c", LOAD_AND_RUN.format(repo=REPO, path=path)],
                              capture_output=True, text=True, timeout=300)
        line = next((ln for ln in done.stdout.splitlines() if ln.startswith("LOADED ")), None)
        result[suffix] = {"size_mb": round(os.path.getsize(path) / 1e6, 2),
                          "fresh_process": json.loads(line[7:]) if line else done.stderr[-2000:]}
    return result


FAILING_CHECK = """
import sys, torch, contextlib, io
sys.path.insert(0, {repo!r})
import stitch
from tests.zoo import make
model, args, kwargs, examples = make("assert_finite")
model = model.cuda()
args = tuple(a.cuda() for a in args)
examples = [(tuple(a.cuda() for a in ex), k) for ex, k in examples]
program = stitch.export(model, args, kwargs, examples=examples)
compiled = stitch.compile(program, {backend!r}, cudagraphs={graphs!r})
bad = args[0].clone(); bad[0, 0] = float("inf")
try:
    with torch.no_grad():
        model(bad)
    print("EAGER no error")
except Exception as e:
    print("EAGER", type(e).__name__, str(e)[:200])
try:
    with torch.no_grad():
        out = compiled(bad)
    torch.cuda.synchronize()
    print("STITCHED no error")
except Exception as e:
    print("STITCHED", type(e).__name__, str(e)[:300].replace(chr(10), " "))
try:
    torch.cuda.synchronize()
    print("CONTEXT", (torch.ones(2, device="cuda") * 2).sum().item())
except Exception as e:
    print("CONTEXT dead:", type(e).__name__, str(e)[:200].replace(chr(10), " "))
"""


def failing_check() -> dict:
    result = {}
    for backend, graphs in [("eager", False), ("aoti", False), ("inductor", True)]:
        label = backend + ("+cudagraphs" if graphs else "")
        try:
            done = subprocess.run(
                [sys.executable, "-c", FAILING_CHECK.format(repo=REPO, backend=backend,
                                                            graphs=graphs)],
                capture_output=True, text=True, timeout=240)
            lines = [ln for ln in done.stdout.splitlines()
                     if ln.startswith(("EAGER", "STITCHED", "CONTEXT"))]
            result[label] = lines or done.stderr[-1500:]
        except Exception as e:  # noqa: BLE001
            result[label] = _err(e)
    return result


def main() -> int:
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    cases = sys.argv[2:]
    os.makedirs(out, exist_ok=True)
    RESULT["env"] = env()
    print(RESULT["env"], flush=True)
    _save(out)
    for section, fn in [("check", failing_check), ("artifact", artifact)]:
        if section in SKIP:
            continue
        start = time.perf_counter()
        try:
            RESULT[section] = fn()
        except Exception:  # noqa: BLE001
            RESULT[section] = traceback.format_exc()[-3000:]
        print(f"== {section} ({time.perf_counter() - start:.0f} s)\n{RESULT[section]}",
              flush=True)
        _save(out)
    from tests.zoo import CASES

    RESULT["zoo"] = []
    for name in cases or [c for c in CASES if "dynamic_shape" not in CASES[c].kinds]:
        start = time.perf_counter()
        try:
            row = zoo_case(name)
        except Exception:  # noqa: BLE001
            row = {"case": name, "crash": traceback.format_exc()[-3000:]}
        row["seconds"] = round(time.perf_counter() - start, 1)
        RESULT["zoo"].append(row)
        print(json.dumps(row, default=str)[:3000], flush=True)
        _save(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
