"""What exporting costs: wall time and peak resident memory of ``stitch.export`` against
``torch.export.export``, per architecture and size (random weights, built from configs).

    make bench-export
    python experiments/export_cost.py [--only bert,t5] [--sizes tiny,6,12,base]
                                      [--timeout 1200] [--merge]
    python experiments/export_cost.py --one ARCH SIZE --measure torch_export|stitch

Each measurement runs in a fresh process (``--one``, one JSON line on stdout), torch.export
first, then stitch: ``ru_maxrss`` is a process's peak, so a process shared by the two would
report the larger peak for both. Each process pays its own warm-up (imports, Dynamo's first
trace), as a user's first export does; the torch.export process also times a second call
on the same model, which shows how much of the first was one-time cost.

torch.export: ``torch.export.export(model, args, kwargs, strict=False)`` on the first
example, static shapes; and, in a process of its own, with ``dynamic_shapes`` marking the
dimensions the examples differ in (``Dim.AUTO``, as stitch marks them), the program that
serves the sizes stitch's does. stitch: ``stitch.export(model, args, kwargs, examples=[second])``;
the examples differ in sequence length (text), so stitch infers a dynamic dimension and
verifies the program on both. The stitch process then re-exports the final graph
(``program.exported_program.module()``, static, first example): the floor, tracing the
final graph once, which is the ratio's basis where torch.export refuses the model.

Writes ``results/export_cost.json`` (rows, commit, versions, date, cores) and
``results/export_cost.md`` after every row.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO, "experiments", "results")
ARCHS = ("bert", "xlm", "longformer", "t5", "vit", "detection")
SIZES = {"tiny": (2, 64), "6": (6, 256), "12": (12, 256), "base": (12, 768)}  # layers, hidden
# the detection model has no depth knob: a backbone per size, both at 320 px
DETECTION = {"tiny": "fasterrcnn_mobilenet_v3_large_320_fpn", "12": "fasterrcnn_resnet50_fpn"}
BATCH, SEQ0, SEQ1 = 2, 128, 96  # text: the traced example, the second one
T5_DECODER = (32, 24)  # decoder lengths of the two examples
IMAGE = 320


def applies(arch: str, size: str) -> bool:
    if arch == "detection":
        return size in DETECTION
    return size != "base" or arch == "bert"


# -- models: (model, [(args, kwargs), (args, kwargs)], what was built) ---------------------


def _ids(seq: int, seed: int, vocab: int = 1000):
    import torch

    g = torch.Generator().manual_seed(seed)
    return torch.randint(5, vocab, (BATCH, seq), generator=g)


def _text(model, vocab_note: str = ""):
    return model.eval(), [((_ids(SEQ0, 0),), {}), ((_ids(SEQ1, 1),), {})], \
        type(model).__name__ + vocab_note


def build(arch: str, size: str):
    import torch

    torch.manual_seed(0)
    layers, hidden = SIZES[size]
    heads = max(2, hidden // 64)
    if arch == "bert":
        from transformers import BertConfig, BertModel

        return _text(BertModel(BertConfig(hidden_size=hidden, num_hidden_layers=layers,
                                          num_attention_heads=heads,
                                          intermediate_size=4 * hidden)))
    if arch == "xlm":
        from transformers import XLMConfig, XLMModel

        return _text(XLMModel(XLMConfig(emb_dim=hidden, n_layers=layers, n_heads=heads)))
    if arch == "longformer":
        from transformers import LongformerConfig, LongformerModel

        # a window dividing both lengths: no padding branch on the sequence length
        return _text(LongformerModel(LongformerConfig(
            hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
            intermediate_size=4 * hidden, attention_window=32)), " (window 32)")
    if arch == "t5":
        from transformers import T5Config, T5Model

        model = T5Model(T5Config(d_model=hidden, d_kv=hidden // heads, d_ff=4 * hidden,
                                 num_layers=layers, num_decoder_layers=layers, num_heads=heads,
                                 use_cache=False)).eval()
        examples = [((_ids(seq, i),), {"decoder_input_ids": _ids(dec, 10 + i)})
                    for i, (seq, dec) in enumerate(zip((SEQ0, SEQ1), T5_DECODER, strict=True))]
        return model, examples, "T5Model (encoder-decoder, decoder ids 2x32 / 2x24, no cache)"
    if arch == "vit":
        from transformers import ViTConfig, ViTModel

        model = ViTModel(ViTConfig(hidden_size=hidden, num_hidden_layers=layers,
                                   num_attention_heads=heads, intermediate_size=4 * hidden,
                                   image_size=224, patch_size=16)).eval()
        g = torch.Generator().manual_seed(0)
        examples = [((torch.rand(BATCH, 3, 224, 224, generator=g),), {}) for _ in range(2)]
        return model, examples, "ViTModel (2x3x224x224, both examples)"
    if arch == "detection":
        import torchvision.models as tvm

        name = DETECTION[size]
        model = tvm.get_model(name, weights=None, weights_backbone=None, min_size=IMAGE,
                              max_size=IMAGE).eval()
        g = torch.Generator().manual_seed(0)
        examples = [(([torch.rand(3, IMAGE, IMAGE, generator=g)],), {}) for _ in range(2)]
        return model, examples, f"{name} ([3x{IMAGE}x{IMAGE}], both examples)"
    raise SystemExit(f"unknown architecture {arch!r}; one of {', '.join(ARCHS)}")


# -- one measurement, in its own process -------------------------------------------------


def _peak_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # KiB on Linux


def _failure(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0][:200] if lines else ''}"


def _timed(fn, rec: dict, prefix: str = "") -> object:
    """Run ``fn``; its seconds and outcome (``ok`` or the error's class and first line, the
    error's first lines under ``error``) go into ``rec``."""
    start = time.perf_counter()
    try:
        value, outcome = fn(), "ok"
    except Exception as e:  # the outcome is what is measured
        value, outcome = None, _failure(e)
        rec[prefix + "error"] = "\n".join(str(e).strip().splitlines()[:12])[:2000]
    rec[prefix + "seconds"] = round(time.perf_counter() - start, 3)
    rec[prefix + "outcome"] = outcome
    return value


def measure(arch: str, size: str, what: str) -> dict:
    import torch

    start = time.perf_counter()
    model, examples, built = build(arch, size)
    (args, kwargs), second = examples
    rec = {"model": built, "build_s": round(time.perf_counter() - start, 3),
           "built_mib": _peak_mib()}
    if what == "torch_export_dynamic":  # the dimensions stitch makes dynamic, as it does
        from capture.inputs import normalize
        from stitch.example_shapes import shapes_from_examples

        shapes = shapes_from_examples(model, normalize(model, args, kwargs, [second]))
        _timed(lambda: torch.export.export(model, args, kwargs, dynamic_shapes=shapes,
                                           strict=False), rec)
        return rec
    if what == "torch_export":
        def once():
            return torch.export.export(model, args, kwargs, strict=False)

        _timed(once, rec)
        rec["peak_mib"] = _peak_mib()
        if rec["outcome"] == "ok":
            _timed(once, rec, "second_")
        return rec
    import stitch

    program = _timed(lambda: stitch.export(model, args, kwargs, examples=[second]), rec)
    rec["peak_mib"] = _peak_mib()
    if program is None:
        return rec
    report = program.report
    rec.update(stages=dict(report.seconds), graphs_before=report.graphs_before,
               breaks_before=report.breaks_before, graphs_after=report.graphs_after)
    from capture.tracing_fixes import tracing_fixes

    graph = program.exported_program.module()
    with tracing_fixes():  # torch.export alone fails on a number among a cond's operands
        _timed(lambda: torch.export.export(graph, args, kwargs, strict=False), rec, "final_")
    return rec


# -- the driver ---------------------------------------------------------------------------


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                          check=False).stdout.strip()


def run_one(arch: str, size: str, what: str, timeout: float) -> dict:
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    cmd = [sys.executable, os.path.abspath(__file__), "--one", arch, size, "--measure", what]
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                              cwd=REPO, check=False)
    except subprocess.TimeoutExpired:
        return {"outcome": f"timeout after {timeout:g} s", "seconds": None}
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [""]
    return {"outcome": f"process exited {done.returncode} after "
                       f"{time.perf_counter() - start:.0f} s: {tail[0][:200]}", "seconds": None}


def row(arch: str, size: str, timeout: float) -> dict:
    exported = run_one(arch, size, "torch_export", timeout)
    dynamic = (run_one(arch, size, "torch_export_dynamic", timeout)
               if exported["outcome"] == "ok" else {"outcome": "-", "seconds": None})
    stitched = run_one(arch, size, "stitch", timeout)
    layers, hidden = SIZES[size]
    rec = {"arch": arch, "size": size, "model": stitched.get("model") or exported.get("model"),
           "layers": None if arch == "detection" else layers,
           "hidden": None if arch == "detection" else hidden,
           "torch_export": exported, "torch_export_dynamic": dynamic, "stitch": stitched}
    if exported["outcome"] == "ok":
        basis, base = "torch.export", exported["seconds"]
    else:
        ok = stitched.get("final_outcome") == "ok"
        basis, base = "final graph", stitched.get("final_seconds") if ok else None
    rec["ratio_basis"] = basis
    rec["ratio"] = (round(stitched["seconds"] / base, 2)
                    if stitched["outcome"] == "ok" and base else None)
    rec["ratio_dynamic"] = (round(stitched["seconds"] / dynamic["seconds"], 2)
                            if stitched["outcome"] == "ok" and dynamic["outcome"] == "ok"
                            else None)
    return rec


def _versions() -> dict:
    import tabulate  # noqa: F401  (the table needs it: fail before the first row)
    import torch
    import torchvision
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__,
            "torchvision": torchvision.__version__, "python": platform.python_version()}


def _s(value) -> str:
    return "-" if value is None else f"{value:g}"


def _outcome(rec: dict) -> str:
    return "ok" if rec["outcome"] == "ok" else rec["outcome"][:60]


def markdown(result: dict) -> str:
    from tabulate import tabulate

    meta = result["meta"]
    rows = []
    for r in result["rows"]:
        te, st = r["torch_export"], r["stitch"]
        stages = " ".join(f"{k}={v:g}" for k, v in st.get("stages", {}).items())
        final = (_s(st.get("final_seconds")) if st.get("final_outcome") == "ok"
                 else (st.get("final_outcome") or "-")[:40])
        td = r.get("torch_export_dynamic") or {"outcome": "not measured", "seconds": None}
        rows.append([r["arch"], r["size"], _s(te["seconds"]), _s(te.get("second_seconds")),
                     _outcome(te), _s(td["seconds"]) if td["outcome"] == "ok"
                     else td["outcome"][:40], _s(st["seconds"]), _outcome(st), final,
                     f"{_s(r['ratio'])} ({r['ratio_basis']})" if r["ratio"] else "-",
                     _s(r.get("ratio_dynamic")),
                     _s(te.get("peak_mib")), _s(st.get("peak_mib")), stages])
    headers = ["model", "size", "torch.export s", "2nd call s", "torch.export",
               "dynamic s", "stitch s", "stitch", "final graph s", "ratio", "ratio (dynamic)",
               "peak MiB torch.export",
               "peak MiB stitch", "stitch stage s"]
    present = {(r["arch"], r["size"]) for r in result["rows"]}
    missing = [f"{a} {s}" for a in ARCHS for s in SIZES if applies(a, s) and (a, s) not in present]
    lines = [
        "# Export cost: stitch.export against torch.export", "",
        f"Commit `{meta['commit']}`{' (uncommitted changes)' if meta['dirty'] else ''}, "
        f"{meta['date']}, torch {meta['torch']}, transformers {meta['transformers']}, "
        f"torchvision {meta['torchvision']}, {meta['cores']} cores, OMP_NUM_THREADS="
        f"{meta['omp_num_threads']}, {meta['timeout_s']:g} s timeout per process.",
        "" if not missing else f"\n**Partial run**, no rows for: {', '.join(missing)}.\n",
        *([f"Rows kept from earlier runs (--merge) measured commit(s) "
           f"{', '.join(meta['merged_rows_from'])}: each row's `commit` in the JSON.", ""]
          if meta.get("merged_rows_from") else []),
        "Sizes: tiny = 2 layers, hidden 64; 6 = 6 layers, hidden 256; 12 = 12 layers, hidden "
        "256; base = 12 layers, hidden 768 (BERT only). Text: batch 2, 128 tokens traced, "
        "96 in the second example. Detection: tiny = fasterrcnn_mobilenet_v3_large_320_fpn, "
        "12 = fasterrcnn_resnet50_fpn, both 320 px.", "",
        "Each cell is one fresh process. 2nd call: torch.export again in the same process. "
        "Dynamic: torch.export in its own process with the dimensions stitch makes dynamic "
        "(those the examples differ in, ``Dim.AUTO``), the program stitch returns serving "
        "every size as it does; ratio (dynamic): stitch / that. "
        "Final graph: torch.export of stitch's program's graph (static), the floor (with "
        "stitch's tracing fixes, which torch.export needs for a number among a cond's "
        "operands). Ratio: "
        "stitch / torch.export, or stitch / final graph where torch.export refuses. Peak: "
        "the process's peak resident memory, model build included.", "",
        tabulate(rows, headers=headers, tablefmt="github"), "",
        *(f"- {r['arch']} {r['size']}: {r['model']}" for r in result["rows"]), "",
        "## Growth with depth", "",
        "stitch (torch.export) seconds by size; tiny is also narrower (hidden 64), so 6 -> 12 "
        "is the pure-depth step.", ""]
    grown = False
    for arch in ARCHS:
        found = {r["size"]: r for r in result["rows"] if r["arch"] == arch}
        if arch == "detection" or len(found) < 2:
            continue
        grown = True
        cells = [f"{size} ({SIZES[size][0]} layers, hidden {SIZES[size][1]}): "
                 f"{_s(found[size]['stitch']['seconds'])} "
                 f"({_s(found[size]['torch_export']['seconds'])})"
                 for size in SIZES if size in found]
        lines.append(f"- {arch}: " + "; ".join(cells))
    if not grown:
        lines.append("(no architecture measured at two sizes in this run)")
    return "\n".join(lines) + "\n"


def write(result: dict) -> None:
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "export_cost.json"), "w") as f:
        json.dump(result, f, indent=1)
    with open(os.path.join(RESULTS, "export_cost.md"), "w") as f:
        f.write(markdown(result))


def _previous_rows(keep: set) -> list[dict]:
    try:
        with open(os.path.join(RESULTS, "export_cost.json")) as f:
            old = json.load(f)
    except (OSError, ValueError):
        return []
    return [dict(r, commit=r.get("commit", old["meta"]["commit"])) for r in old["rows"]
            if (r["arch"], r["size"]) in keep]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(ARCHS), help="architectures, comma-separated")
    parser.add_argument("--sizes", default=",".join(SIZES), help="sizes, comma-separated")
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds per process")
    parser.add_argument("--merge", action="store_true",
                        help="keep the rows of the existing results this run does not measure")
    parser.add_argument("--one", nargs=2, metavar=("ARCH", "SIZE"),
                        help="measure one model in this process; print one JSON line")
    parser.add_argument("--measure", choices=("torch_export", "torch_export_dynamic", "stitch"),
                        default="stitch")
    opts = parser.parse_args(argv)
    if opts.one:
        sys.path.insert(0, REPO)
        print(json.dumps(measure(*opts.one, opts.measure)), flush=True)
        return 0
    only, sizes = opts.only.split(","), opts.sizes.split(",")
    unknown = sorted(set(only) - set(ARCHS)) + sorted(set(sizes) - set(SIZES))
    if unknown:
        parser.error(f"unknown {', '.join(unknown)}; architectures {', '.join(ARCHS)}, "
                     f"sizes {', '.join(SIZES)}")
    todo = [(a, s) for a in ARCHS if a in only for s in SIZES if s in sizes and applies(a, s)]
    commit = _git("rev-parse", "--short", "HEAD")
    meta = {"commit": commit, "dirty": bool(_git("status", "--porcelain", "--", "stitch",
                                                 "capture")),
            "date": datetime.datetime.now().isoformat(timespec="seconds"), **_versions(),
            "cores": os.cpu_count(), "machine": platform.machine(),
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS", "1"),
            "timeout_s": opts.timeout, "selection": {"only": only, "sizes": sizes}}
    rows = []
    if opts.merge:
        everything = {(a, s) for a in ARCHS for s in SIZES}
        rows = _previous_rows(everything - set(todo))
        if rows:
            meta["merged_rows_from"] = sorted({r["commit"] for r in rows})
    for arch, size in todo:
        print(f"{arch} {size} ...", end=" ", flush=True)
        rec = dict(row(arch, size, opts.timeout), commit=commit)
        rows.append(rec)
        rows.sort(key=lambda r: (ARCHS.index(r["arch"]), list(SIZES).index(r["size"])))
        write({"meta": meta, "rows": rows})
        print(f"torch.export {_s(rec['torch_export']['seconds'])} s "
              f"({_outcome(rec['torch_export'])}), stitch {_s(rec['stitch']['seconds'])} s "
              f"({_outcome(rec['stitch'])})", flush=True)
    print(f"wrote {os.path.relpath(RESULTS, REPO)}/export_cost.{{json,md}}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
