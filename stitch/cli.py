"""Command line: ``stitch explain|export|inspect|run|serve|engine|demo`` (see ``--help``)."""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any

from capture.errors import InputError, StitchError


def load_factory(spec: str) -> tuple[Any, tuple, dict, list | None]:
    """Call ``pkg.module:factory``; it returns (model, args[, kwargs[, examples]])."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise InputError(f"expected pkg.module:factory, found {spec!r}; "
                         "e.g. stitch explain stitch.demo_model:make_demo")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise InputError(f"cannot import {module_name!r} (from {spec!r}): {e}") from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise InputError(f"{module_name} has no callable {attr!r} (from {spec!r})")
    made = factory()
    if not isinstance(made, tuple) or not 2 <= len(made) <= 4:
        raise InputError(f"{spec}() must return (model, args), (model, args, kwargs) or "
                         f"(model, args, kwargs, examples); it returned {type(made).__name__}")
    model, args, kwargs, examples = (*made, None, None)[:4]
    return model, args, kwargs or {}, examples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stitch", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_explain = sub.add_parser("explain", help="print the graph-break census of a model")
    p_explain.add_argument("factory", help="pkg.module:factory returning (model, args[, kwargs])")
    p_explain.add_argument("--json", action="store_true", help="print the census as JSON")
    p_export = sub.add_parser("export", help="stitch a model into one verified graph and "
                              "print the report")
    p_export.add_argument("factory", help="pkg.module:factory returning (model, args[, kwargs])")
    p_export.add_argument("--json", action="store_true", help="print the report as JSON")
    p_export.add_argument("--allow-partial", action="store_true",
                          help="return a program even if some breaks remain")
    p_export.add_argument("-o", "--output", help="write the deployment artifact here: .pt2 "
                          "(AOTInductor) or .onnx (the graph as ONNX, every branch side "
                          "checked with ONNX Runtime)")
    p_export.add_argument("--backend", default="auto",
                          help="auto (profile and pick), eager, inductor, aoti, onnxruntime "
                               "or tensorrt")
    p_export.add_argument("--candidates", metavar="A,B",
                          help="with --backend auto: only these candidates (e.g. "
                               "inductor,aoti skips the ONNX export)")
    p_export.add_argument("--dynamic-batch", type=int, metavar="MAX",
                          help="export dim 0 of every tensor input as one dynamic batch "
                               "dimension, 1..MAX (needed to serve batches of other sizes)")
    p_export.add_argument("--triton-repo", metavar="DIR",
                          help="also write a Triton model repository serving the artifact "
                               "(needs -o; an .onnx artifact gives the ONNX variant)")
    p_serve = sub.add_parser("serve", help="serve an artifact on Triton Inference Server "
                             "(PyTriton; the serve extra)")
    p_serve.add_argument("artifact")
    p_serve.add_argument("--host", default="127.0.0.1")
    p_serve.add_argument("--http-port", type=int, default=8000)
    p_serve.add_argument("--grpc-port", type=int, default=8001)
    p_serve.add_argument("--metrics-port", type=int, default=8002)
    p_serve.add_argument("--max-batch-size", type=int, default=None,
                         help="largest batch a request may carry (needs a dynamic batch dim)")
    p_serve.add_argument("--model-name", default="stitched")
    p_serve.add_argument("--log-level", default="INFO")
    p_serve.add_argument("--engine", choices=["pytriton", "repository"], default="pytriton",
                         help="pytriton: requests reach this process through PyTriton; "
                              "repository: Triton's Python backend runs a generated model "
                              "repository (no proxy hop; lower latency)")
    p_inspect = sub.add_parser("inspect", help="print an artifact's (.pt2 or .onnx) manifest, "
                               "decisions and epilogue (checks it first)")
    p_inspect.add_argument("artifact")
    p_run = sub.add_parser("run", help="load an artifact and run it on saved inputs")
    p_run.add_argument("artifact")
    p_run.add_argument("--inputs", required=True,
                       help="a .pt file holding a tuple of positional input tensors "
                            "(loaded with torch.load(weights_only=True))")
    p_engine = sub.add_parser("engine", help="build a TensorRT engine from an .onnx artifact "
                              "(TensorRT-RTX's ONNX parser; no GPU needed; built, not run)")
    p_engine.add_argument("artifact", help="a stitch .onnx artifact or a plain ONNX model")
    p_engine.add_argument("-o", "--output", help="where the serialized engine goes")
    p_engine.add_argument("--json", action="store_true", help="print the report as JSON")
    p_demo = sub.add_parser("demo", help="run the bundled example end to end")
    p_demo.add_argument("--out", default="demo-out", help="where the demo writes its artifact")
    args = parser.parse_args(argv)
    try:
        if args.command == "explain":
            return _explain(args)
        if args.command == "export":
            return _export(args)
        if args.command == "inspect":
            return _inspect(args)
        if args.command == "serve":
            from stitch.serve.server import ServeOptions, serve

            return serve(args.artifact, ServeOptions(
                args.host, args.http_port, args.grpc_port, args.metrics_port,
                args.max_batch_size, args.model_name, args.log_level, args.engine))
        if args.command == "run":
            return _run(args)
        if args.command == "engine":
            return _engine(args)
        if args.command == "demo":
            from stitch.demo import run_demo

            return run_demo(args.out)
    except StitchError as e:
        print(f"stitch: error: {e}", file=sys.stderr)
        return 2
    return 1


def _explain(args) -> int:
    from capture.explain import public_explain as explain  # with the torch.export probe

    model, margs, kwargs, examples = load_factory(args.factory)
    census = explain(model, margs, kwargs, examples=examples)
    print(census.dumps() if args.json else census)
    return 0


def _export(args) -> int:
    import stitch

    model, margs, kwargs, examples = load_factory(args.factory)
    if args.triton_repo and not args.output:
        raise InputError("--triton-repo needs -o/--output: the repository serves the artifact")
    shapes = batch_shapes(model, margs, kwargs, args.dynamic_batch) if args.dynamic_batch else None
    program = stitch.export(model, margs, kwargs, examples=examples,
                            allow_partial=args.allow_partial, dynamic_shapes=shapes)
    print(program.report.dumps() if args.json else program.report)
    if args.output:
        candidates = args.candidates.split(",") if args.candidates else None
        compiled = stitch.compile(program, args.backend, candidates=candidates)
        print(compiled.decision)
        compiled.save(args.output)
        print(f"wrote {args.output}")
    if args.triton_repo:
        from stitch.serve.triton_repo import write_repository

        print(f"wrote {write_repository(args.output, args.triton_repo, stock_onnx=True)}")
    return 0


def batch_shapes(model, args: tuple, kwargs: dict, max_batch: int) -> dict:
    """dynamic_shapes (by forward's argument names) marking dim 0 of every tensor input as one
    shared batch dimension, 1..max_batch."""
    import inspect

    import torch
    from torch.export import Dim

    batch = Dim("batch", min=1, max=max_batch)
    try:
        bound = inspect.signature(model.forward).bind(*args, **kwargs)
    except (TypeError, ValueError) as e:
        raise InputError(f"--dynamic-batch: the factory's inputs do not fit forward(): {e}") \
            from None
    return {name: {0: batch} if isinstance(value, torch.Tensor) and value.dim() > 0 else None
            for name, value in bound.arguments.items()}


def _inspect(args) -> int:
    import json

    from stitch.deploy.artifact import read_manifest

    if args.artifact.endswith(".onnx"):
        from stitch.deploy.onnx_artifact import read_onnx

        manifest, epilogue, graph = read_onnx(args.artifact)
        manifest = {**manifest, "onnx": {**graph.to_json(), "bytes": len(graph.model)}}
    else:
        manifest, epilogue = read_manifest(args.artifact)
    shown = {k: v for k, v in manifest.items() if k != "entries"}
    shown["entries"] = len(manifest["entries"])
    shown["epilogue"] = epilogue.to_json()
    print(json.dumps(shown, indent=2))
    return 0


def _engine(args) -> int:
    import json

    from stitch.deploy.tensorrt_engine import tensorrt_engine

    engine = tensorrt_engine(args.artifact, args.output)
    print(json.dumps(engine.to_json(), indent=2) if args.json else engine)
    return 0 if engine.built else 1


def _run(args) -> int:
    import torch

    import stitch

    program = stitch.load(args.artifact)
    inputs = torch.load(args.inputs, weights_only=True)
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    with torch.no_grad():
        out = program(*inputs)
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
