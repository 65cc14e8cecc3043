"""``make bench-cold``: cold start on the bench's real rows, from a fresh process to the
first output, for the saved artifact against the original model (torch.compile, and eager
as a reference).

Per row, a preparing subprocess builds the model and its inputs as the sweep does (tiny
config, seeded random weights), runs ``stitch.export`` and ``stitch.compile(program,
"auto")``, and saves what ``auto`` deployed as the artifact (``.onnx`` where it deployed
ONNX Runtime, else ``.pt2``: AOTInductor, or regional where that was deployed; where the
model itself or the graph run eagerly won, ``.pt2`` builds AOTInductor, and the table says
so). It also saves the original model (``save_pretrained``; torchvision: its state_dict)
and the first example's inputs. Then each of these runs once, in its own fresh process:

- artifact: ``import stitch``, ``stitch.load(path)``, inputs from disk, first call;
- compile: ``import torch``, the model from disk (``from_pretrained`` / builder +
  ``load_state_dict``), inputs from disk, ``torch.compile(model)``, first call; with an
  empty Inductor cache (``compile``) and again with the cache the first run left
  (``compile_warm``);
- eager: the same as compile without ``torch.compile``.

Each child takes ``time.perf_counter()`` on its first line and reports phases from there;
the parent times the whole subprocess too (interpreter start and exit included). Loading
the inputs is counted on every side. The artifact's and torch.compile's first outputs are
checked against eager's (``torch.testing.assert_close``, rtol = atol = 1e-4).

Usage: python experiments/cold_start.py [--only ctrl,xlm]   (about 2-4 minutes a row here)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
# (suite, model): torch.export takes the first four as written (and matches eager); the
# rest it refuses, and the last deploys the model itself in the latency bench
ROWS = [("hf", "ctrl"), ("hf", "xlm"), ("hf", "reformer"), ("hf", "higgs_audio_v2"),
        ("hf", "fsmt"), ("hf", "mimi_encoder"), ("hf", "qwen3_vl_vision"),
        ("torchvision", "retinanet_resnet50_fpn")]
PREPARE_TIMEOUT_S = 900
CHILD_TIMEOUT_S = 900

# {dir}: the row's folder (prepare.json, model/, inputs.pt, the artifact); the child's
# first output goes to {out} after the clock stops
LOAD_INPUTS = "args, kwargs = torch.load({dir!r} + '/inputs.pt', weights_only=False)"
BUILD = {
    "hf": """import transformers
model = getattr(transformers, {cls!r}).from_pretrained({dir!r} + '/model').eval()""",
    "torchvision": """import torch, torchvision.models as tvm
model = tvm.get_model({cls!r}, **{options!r})
model.load_state_dict(torch.load({dir!r} + '/model/state_dict.pt'))
model = model.eval()""",
}
CHILD = """import time
t0 = time.perf_counter()
marks = {{}}
{body}
marks["first_output"] = time.perf_counter() - t0
import json, sys
sys.path.insert(0, {here!r})
from cold_start import save_output
save_output(out, {out!r})
print("COLD " + json.dumps(marks))
"""
BODIES = {
    "artifact": """import stitch
marks["import"] = time.perf_counter() - t0
{container_imports}
marks["containers"] = time.perf_counter() - t0
program = stitch.load({artifact!r})
marks["load"] = time.perf_counter() - t0
import torch
{inputs}
marks["inputs"] = time.perf_counter() - t0
torch.manual_seed(0)
with torch.no_grad():
    out = program(*args, **kwargs)""",
    "eager": """import torch
marks["import"] = time.perf_counter() - t0
{build}
marks["load"] = time.perf_counter() - t0
{inputs}
marks["inputs"] = time.perf_counter() - t0
torch.manual_seed(0)
with torch.no_grad():
    out = model(*args, **kwargs)""",
    "compile": """import torch
marks["import"] = time.perf_counter() - t0
{build}
marks["load"] = time.perf_counter() - t0
{inputs}
marks["inputs"] = time.perf_counter() - t0
compiled = torch.compile(model)
torch.manual_seed(0)
with torch.no_grad():
    out = compiled(*args, **kwargs)""",
}


def artifact_suffix(chosen: str) -> str:
    """The artifact format shipping what ``auto`` chose: ONNX for ONNX Runtime, else .pt2."""
    return ".onnx" if chosen.split("+")[0] == "onnxruntime" else ".pt2"


def artifact_kind(chosen: str) -> str:
    """What the saved file holds (``stitch.deploy.save``): regional and AOTInductor
    deployments save themselves; anything else saved as .pt2 is an AOTInductor build."""
    base = chosen.split("+")[0]
    if base == "onnxruntime":
        return "onnx (onnxruntime)"
    return "pt2 (regional)" if base == "regional" else "pt2 (aoti)"


def child_code(kind: str, prepared: dict, folder: str, out: str) -> str:
    inputs = LOAD_INPUTS.format(dir=folder)
    build = BUILD[prepared["suite"]].format(dir=folder, cls=prepared["class"],
                                            options=prepared.get("options", {}))
    modules = prepared.get("container_modules", [])
    imports = "\n".join(f"import {m}" for m in modules)
    body = BODIES[kind].format(artifact=os.path.join(folder, prepared["artifact"]),
                               inputs=inputs, build=build, container_imports=imports)
    return CHILD.format(body=body, here=HERE, out=out)


def container_modules(spec) -> list[str]:
    """Modules defining the pytree containers of ``spec`` (a TreeSpec) beyond Python's and
    torch's own: e.g. ``transformers.modeling_outputs`` for a ModelOutput."""
    found, todo = set(), [spec]
    while todo:
        node = todo.pop()
        if node.type is not None and node.type.__module__.split(".")[0] not in (
                "builtins", "collections", "torch"):
            found.add(node.type.__module__)
        todo += node.children()
    return sorted(found)


def op_libraries(graph_module) -> set[str]:
    """Libraries whose custom operators ``graph_module`` calls, cond arms and loop bodies
    included (``torchvision::nms``): a graph holding them deserializes only once the
    library registered them."""
    import torch

    return {n.target.namespace for m in graph_module.modules() if hasattr(m, "graph")
            for n in m.graph.nodes if isinstance(n.target, torch._ops.OpOverload)
            and n.target.namespace in ("torchvision", "torchaudio")}


def parse_cold(stdout: str) -> dict | None:
    """The child's phase marks (seconds since its first line), or None without its line."""
    line = next((ln for ln in stdout.splitlines() if ln.startswith("COLD ")), None)
    return None if line is None else json.loads(line[5:])


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if not numerator or not denominator:
        return None
    return round(numerator / denominator, 3)


def save_output(out, path: str) -> None:
    """The output's tensors, flattened (a ModelOutput through ``to_tuple``), to ``path``."""
    import torch
    from torch.utils._pytree import tree_leaves

    if hasattr(out, "to_tuple"):
        out = out.to_tuple()
    torch.save([t for t in tree_leaves(out) if isinstance(t, torch.Tensor)], path)


def same_output(expected_path: str, got_path: str) -> tuple[bool, float | None, str]:
    """(equal within rtol = atol = 1e-4, max abs error, why not)."""
    import torch

    expected, got = torch.load(expected_path), torch.load(got_path)
    if len(expected) != len(got):
        return False, None, f"{len(expected)} tensors expected, got {len(got)}"
    worst = 0.0
    for i, (x, y) in enumerate(zip(expected, got, strict=True)):
        try:
            torch.testing.assert_close(y, x, rtol=1e-4, atol=1e-4, equal_nan=True,
                                       check_dtype=False)
        except AssertionError as e:
            return False, None, f"output {i}: {str(e).splitlines()[0][:160]}"
        if x.numel() and x.dtype.is_floating_point:
            worst = max(worst, (x.double() - y.double()).abs().nan_to_num(0.0).max().item())
    return True, worst, ""


def prepare(suite: str, name: str, folder: str) -> None:
    """The row's model, inputs and artifact into ``folder``; ``prepare.json`` says what."""
    import contextlib
    import io

    import torch

    sys.path.insert(0, HERE)
    import sweep_worker
    from bench_sweep import guarded_only

    import stitch

    torch.set_num_threads(1)
    model, args, kwargs, examples = sweep_worker.build(suite, name, {})
    allow = name in guarded_only(os.path.join(HERE, "results", "sweep.json"))
    info: dict = {"suite": suite, "model": name, "allow_guards": allow}
    start = time.perf_counter()
    program = stitch.export(model, args, kwargs, examples=examples,
                            settings=stitch.Settings(allow_guards=allow))
    info["export_s"] = round(time.perf_counter() - start, 1)
    # stitch.load needs these imported first: it registers only transformers' caches
    spec = program.exported_program.call_spec
    info["container_modules"] = sorted(set(container_modules(spec.in_spec))
                                       | set(container_modules(spec.out_spec))
                                       | op_libraries(program.exported_program.graph_module))
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        start = time.perf_counter()
        compiled = stitch.compile(program, "auto", repeats=10)
        info["compile_auto_s"] = round(time.perf_counter() - start, 1)
        chosen = compiled.decision.chosen
        info.update(deployed=chosen, graph_deployed=compiled.decision.graph,
                    artifact=name + artifact_suffix(chosen), artifact_kind=artifact_kind(chosen))
        start = time.perf_counter()
        try:
            compiled.save(os.path.join(folder, info["artifact"]))
        except stitch.ArtifactError as e:
            # what auto deployed (the model, or a graph AOTInductor fails on) does not save:
            # the regionally lowered graph does, where any region lowers
            info["auto_not_saved"] = str(e).splitlines()[0][:300]
            compiled = stitch.compile(program, "regional")
            info.update(artifact=name + ".pt2", artifact_kind="pt2 (regional, not auto's)")
            compiled.save(os.path.join(folder, info["artifact"]))
        info["save_s"] = round(time.perf_counter() - start, 1)
    info["artifact_mb"] = round(os.path.getsize(os.path.join(folder, info["artifact"])) / 1e6, 2)
    os.makedirs(os.path.join(folder, "model"))
    if suite == "torchvision":
        import sweep_vision

        info["class"] = name
        info["options"] = {"weights": None, "weights_backbone": None}
        if not name.startswith("ssd"):
            info["options"].update(min_size=sweep_vision.IMAGE, max_size=sweep_vision.IMAGE)
        torch.save(model.state_dict(), os.path.join(folder, "model", "state_dict.pt"))
    else:
        info["class"] = type(model).__name__
        model.save_pretrained(os.path.join(folder, "model"))
    info["model_mb"] = round(sum(os.path.getsize(os.path.join(folder, "model", f))
                                 for f in os.listdir(os.path.join(folder, "model"))) / 1e6, 2)
    torch.save((args, kwargs), os.path.join(folder, "inputs.pt"))
    with open(os.path.join(folder, "prepare.json"), "w") as f:
        json.dump(info, f)


def _load_average() -> float:
    return round(os.getloadavg()[0], 2)


def measure(kind: str, prepared: dict, folder: str, cache: str) -> dict:
    """One fresh process of ``kind``; Inductor's cache at ``cache``."""
    out = os.path.join(folder, f"out_{kind}.pt")
    code = child_code(kind.removesuffix("_warm"), prepared, folder, out)
    env = dict(os.environ, OMP_NUM_THREADS="1", TORCHINDUCTOR_CACHE_DIR=cache,
               PYTHONWARNINGS="ignore")
    result: dict = {"load_average": _load_average()}
    start = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              cwd=folder, env=env, timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return result | {"error": f"no output within {CHILD_TIMEOUT_S} s"}
    result["process_s"] = round(time.perf_counter() - start, 3)
    marks = parse_cold(done.stdout)
    if marks is None:
        return result | {"error": (done.stderr.strip().splitlines() or ["?"])[-1][:300]}
    result["phases_s"] = {k: round(v, 3) for k, v in marks.items()}
    result["first_output_s"] = result["phases_s"]["first_output"]
    result["output"] = out
    return result


def row(suite: str, name: str, work: str) -> dict:
    folder = os.path.join(work, f"{suite}-{name}")
    os.makedirs(folder)
    print(f"{suite}/{name}: export + auto + save", flush=True)
    try:
        done = subprocess.run([sys.executable, __file__, "--prepare", suite, name, folder],
                              capture_output=True, text=True, cwd=REPO,
                              timeout=PREPARE_TIMEOUT_S,
                              env=dict(os.environ, OMP_NUM_THREADS="1"))
    except subprocess.TimeoutExpired:
        return {"suite": suite, "model": name,
                "error": f"export + auto + save took over {PREPARE_TIMEOUT_S} s"}
    if done.returncode != 0:
        return {"suite": suite, "model": name,
                "error": (done.stderr.strip().splitlines() or ["?"])[-1][:300]}
    with open(os.path.join(folder, "prepare.json")) as f:
        prepared = json.load(f)
    cold = {}
    cache = os.path.join(folder, "inductor-cache")
    for kind in ("eager", "artifact", "compile", "compile_warm"):
        print(f"  {kind}", flush=True)
        # the artifact gets its own empty cache; compile_warm reuses compile's
        own = cache if kind.startswith("compile") else os.path.join(folder, f"cache-{kind}")
        cold[kind] = measure(kind, prepared, folder, own)
    for kind in ("artifact", "compile"):
        if "output" in cold[kind] and "output" in cold["eager"]:
            ok, worst, why = same_output(cold["eager"]["output"], cold[kind]["output"])
            cold[kind].update(matches_eager=ok, max_abs_error=worst,
                              **({"why_not": why} if why else {}))
    for m in cold.values():
        m.pop("output", None)
    return prepared | {"cold": cold}


def merged(path: str, new: list[dict]) -> list[dict]:
    """The committed rows, each keeping the commit and date it was measured at, with those
    of ``new`` in their place; in ``ROWS`` order."""
    with open(path) as f:
        old = json.load(f)
    meta = old["meta"]
    commit = meta["commit"][:10] + ("+" if meta["dirty"] else "")
    rows = {(r["suite"], r["model"]): dict(r, commit=r.get("commit", commit),
                                           date=r.get("date", meta["date"]),
                                           head_at_end=r.get("head_at_end", meta.get(
                                               "head_at_end", meta["commit"])[:10]))
            for r in old["rows"]}
    rows |= {(r["suite"], r["model"]): r for r in new}
    order = {key: i for i, key in enumerate(ROWS)}
    return sorted(rows.values(), key=lambda r: order.get((r["suite"], r["model"]), len(order)))


def measured_at(row: dict) -> str:
    """The row's commit; ``a..b`` where HEAD moved from a to b during its run."""
    commit, end = row.get("commit", ""), row.get("head_at_end", "")
    return commit if not end or commit.startswith(end) else f"{commit}..{end}"


def markdown(result: dict) -> str:
    from tabulate import tabulate

    def first(r, kind, key="first_output_s"):
        return r.get("cold", {}).get(kind, {}).get(key)

    rows = []
    for r in result["rows"]:
        if "cold" not in r:
            rows.append([r["model"], r["suite"], "-", "-", "-", "-", "-", "-", "-", "-", "-",
                         "not measured: " + r["error"][:80], "-", measured_at(r)])
            continue
        art = r["cold"]["artifact"]
        check = ("yes" if art.get("matches_eager") else "no " + art.get("why_not", "")[:50]
                 ) if "matches_eager" in art else art.get("error", "-")[:60]
        rows.append([r["model"], r["suite"], r["deployed"], r["artifact_kind"],
                     first(r, "artifact"), first(r, "compile"), first(r, "compile_warm"),
                     first(r, "eager"), ratio(first(r, "artifact"), first(r, "compile")),
                     ratio(first(r, "artifact"), first(r, "compile_warm")),
                     ratio(first(r, "artifact", "process_s"), first(r, "compile", "process_s"))
                     if first(r, "artifact") else None,
                     check, ", ".join(r.get("container_modules", [])) or "-",
                     measured_at(r)])
    table = tabulate(rows, headers=[
        "model", "suite", "auto deployed", "artifact", "artifact s", "torch.compile s",
        "torch.compile, warm cache s", "eager s", "artifact / torch.compile",
        "artifact / torch.compile, warm cache",
        "same, whole process", "artifact output = eager", "imported before stitch.load",
        "measured at"],
        tablefmt="github")
    def spread(against: str) -> str:
        found = sorted(x for x in (ratio(first(r, "artifact"), first(r, against))
                                   for r in result["rows"]) if x is not None)
        return (f"median {statistics.median(found)}, from {found[0]} to {found[-1]} "
                f"({len(found)} rows)") if found else "no rows"

    summary = (f"Artifact / torch.compile: {spread('compile')}. Against torch.compile with a "
               f"warm cache: {spread('compile_warm')}. Against eager: {spread('eager')}.\n\n")
    meta = result["meta"]
    return (f"# Cold start on real rows (torch {meta['torch']}, transformers "
            f"{meta['transformers']}, {meta['cores']} cores, one thread; commit per row)\n\n"
            "Seconds from a fresh process's first line to the first output, each one run "
            "(`experiments/cold_start.py`). artifact: `import stitch` + `stitch.load` + "
            "inputs from disk + first call. torch.compile: `import torch`, the original "
            "model from disk (`from_pretrained`; torchvision: builder + `load_state_dict`), "
            "inputs, `torch.compile(model)` + first call, Inductor's cache empty (warm "
            "cache: a second process, the first's cache kept). eager: the same, not compiled. "
            "\"whole process\": the ratio of the subprocess wall times (interpreter start and "
            "exit included). \"imported before stitch.load\": modules defining the output's "
            "containers (a transformers ModelOutput) or the graph's custom operators "
            "(torchvision's nms), imported by the artifact's process after `import stitch` "
            "and counted in its time: without them `stitch.load` fails in a fresh process "
            "(\"Deserializing ... in pytree is not registered\", \"failed to resolve "
            "torch.ops.torchvision.nms.default\"). \"measured at\": the commit each row ran "
            "at, + where the working tree held changes to stitch/ or capture/, a..b where "
            "HEAD moved from a to b during that run (each process ran the stitch the "
            "working tree held when it started). "
            "Where what `auto` deployed cannot be saved (the model itself, or a graph "
            "AOTInductor fails on), the artifact is the regionally lowered graph "
            "(`stitch.compile(program, \"regional\")`), marked \"not auto's\". "
            "Phases per row in cold_start.json. The machine was shared "
            "(load average at each run in the JSON).\n\n" + summary + table + "\n")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", help="comma list of model names")
    parser.add_argument("--keep", metavar="DIR", help="build the rows in DIR (new), kept")
    parser.add_argument("--merge", action="store_true",
                        help="replace only these rows in the committed cold_start.json")
    parser.add_argument("--prepare", nargs=3, metavar=("SUITE", "NAME", "DIR"),
                        help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.prepare:
        prepare(*opts.prepare)
        return 0
    import torch
    import transformers

    sys.path.insert(0, HERE)
    from bench import write_results

    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                            cwd=REPO).stdout.strip()
    status = subprocess.run(["git", "status", "--porcelain", "--", "stitch", "capture"],
                            capture_output=True, text=True, cwd=REPO).stdout
    diff = subprocess.run(["git", "diff", "HEAD", "--", "stitch", "capture"],
                          capture_output=True, cwd=REPO).stdout
    rows = [r for r in ROWS if not opts.only or r[1] in opts.only.split(",")]
    results = []
    with tempfile.TemporaryDirectory(prefix="stitch-cold-") as work:
        if opts.keep:
            os.makedirs(opts.keep)
        for suite, name in rows:
            results.append(row(suite, name, opts.keep or work)
                           | {"commit": commit[:10] + ("+" if status else ""),
                              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())})
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                          cwd=REPO).stdout.strip()
    for r in results:
        r["head_at_end"] = head[:10]
    earlier = []
    if opts.merge:
        path = os.path.join(HERE, "results", "cold_start.json")
        results = merged(path, results)
        with open(path) as f:
            old = json.load(f)["meta"]
        earlier = old.pop("earlier_runs", []) + [old]
    result = {"meta": {"commit": commit, "head_at_end": head, "dirty": [ln[3:] for ln in status.splitlines()],
                       "dirty_diff_sha1": hashlib.sha1(diff).hexdigest() if status else None,
                       "torch": torch.__version__, "transformers": transformers.__version__,
                       "python": platform.python_version(), "cores": os.cpu_count(),
                       "threads": 1,
                       "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                       "earlier_runs": earlier},
              "rows": results}
    write_results(result, "cold_start", markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
