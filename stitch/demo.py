"""``make demo``: the bundled example, end to end."""

from __future__ import annotations

import logging
import os

import torch

from stitch.demo_model import make_demo


def run_demo(out_dir: str) -> int:
    import stitch

    logging.basicConfig(level=logging.INFO, format="  [log] %(name)s: %(message)s")
    model, args, kwargs, examples = make_demo()
    print("== 1. census: where the demo model breaks under torch.compile ==")
    census = stitch.explain(model, args, kwargs, examples=examples)
    print(census)
    print("\n== 2. stitch.export: one torch.export graph, verified against eager ==")
    program = stitch.export(model, args, kwargs, examples=examples)
    print(program.report)
    print("\n== 3. the stitched program runs the graph, then replays the log line ==")
    for i, (ex_args, ex_kwargs) in enumerate([(args, kwargs), *examples]):
        print(f"  example {i}, stitched program:")
        with torch.no_grad():
            got = program(*ex_args, **ex_kwargs)
        print(f"  example {i}, eager model:")
        with torch.no_grad():
            want = model(*ex_args, **ex_kwargs)
        print(f"  example {i}: max |stitched - eager| = {(got - want).abs().max().item():.2e}")
    print("\n== 4. the graph ==")
    ops = program.report.graph_ops
    print(f"  one ExportedProgram holding {', '.join(f'{k} x{v}' for k, v in ops.items())}; "
          f"{len(program.epilogue)} deferred call(s) in the epilogue")
    print("\n== 5. deploy: build every backend this machine has, check, time, pick ==")
    compiled = stitch.compile(program, "auto")
    print(compiled.decision)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "demo.pt2")
    compiled.save(path)
    print(f"\n== 6. artifact {path} ({os.path.getsize(path) / 1e6:.1f} MB), loaded back ==")
    loaded = stitch.load(path)
    print(f"  profiling chose {loaded.deployment['chosen']}; this file runs with "
          f"{loaded.manifest['runs_with']} (the ONNX artifact below runs with onnxruntime)")
    with torch.no_grad():
        for i, (ex_args, ex_kwargs) in enumerate([(args, kwargs), *examples]):
            got, want = loaded(*ex_args, **ex_kwargs), model(*ex_args, **ex_kwargs)
            print(f"  example {i}: max |loaded - eager| = {(got - want).abs().max().item():.2e}")
    _onnx_route(compiled, model, [(args, kwargs), *examples], out_dir)
    return 0


def _onnx_route(compiled, model, inputs, out_dir: str) -> None:
    """The same graph as ONNX next to the .pt2, and a TensorRT engine built from it."""
    import stitch
    from stitch.errors import StitchError

    path = os.path.join(out_dir, "demo.onnx")
    print(f"\n== 7. the ONNX artifact {path}: If for the cond, every branch side checked "
          "with ONNX Runtime ==")
    try:
        compiled.save(path)
    except StitchError as e:
        print(f"  not written: {e}")
        return
    loaded = stitch.load(path)
    print(f"  {os.path.getsize(path) / 1e6:.2f} MB, run by {loaded.manifest['runs_with']}; "
          "epilogue and manifest in the ONNX metadata")
    with torch.no_grad():
        for i, (ex_args, ex_kwargs) in enumerate(inputs):
            got, want = loaded(*ex_args, **ex_kwargs), model(*ex_args, **ex_kwargs)
            print(f"  example {i}: max |onnx - eager| = {(got - want).abs().max().item():.2e}")
    print("\n== 8. a TensorRT engine from the ONNX artifact (TensorRT-RTX's ONNX parser; "
          "no GPU needed to build) ==")
    try:
        engine = stitch.tensorrt_engine(path, os.path.join(out_dir, "demo.engine"))
    except StitchError as e:
        print(f"  not built: {e}")
        return
    print("  " + str(engine).replace("\n", "\n  "))
