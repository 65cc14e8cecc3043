"""Command line: ``stitch explain pkg.module:factory [--json]``, ``stitch demo``."""

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
                         "e.g. stitch explain stitch.zoo:print_stats")
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
    p_export.add_argument("-o", "--output", help="write the deployment artifact (.pt2) here")
    p_export.add_argument("--backend", default="auto",
                          help="auto (profile and pick), eager, inductor, aoti or tensorrt")
    p_inspect = sub.add_parser("inspect", help="print an artifact's manifest, decisions and "
                               "epilogue (checks it first)")
    p_inspect.add_argument("artifact")
    p_run = sub.add_parser("run", help="load an artifact and run it on saved inputs")
    p_run.add_argument("artifact")
    p_run.add_argument("--inputs", required=True,
                       help="a .pt file holding a tuple of positional input tensors "
                            "(loaded with torch.load(weights_only=True))")
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
        if args.command == "run":
            return _run(args)
        if args.command == "demo":
            from stitch.demo import run_demo

            return run_demo(args.out)
    except StitchError as e:
        print(f"stitch: error: {e}", file=sys.stderr)
        return 2
    return 1


def _explain(args) -> int:
    from capture import explain

    model, margs, kwargs, examples = load_factory(args.factory)
    census = explain(model, margs, kwargs, examples=examples)
    print(census.dumps() if args.json else census)
    return 0


def _export(args) -> int:
    import stitch

    model, margs, kwargs, examples = load_factory(args.factory)
    program = stitch.export(model, margs, kwargs, examples=examples,
                            allow_partial=args.allow_partial)
    print(program.report.dumps() if args.json else program.report)
    if args.output:
        compiled = stitch.compile(program, args.backend)
        print(compiled.decision)
        compiled.save(args.output)
        print(f"wrote {args.output}")
    return 0


def _inspect(args) -> int:
    import json

    from stitch.deploy.artifact import read_manifest

    manifest, epilogue = read_manifest(args.artifact)
    shown = {k: v for k, v in manifest.items() if k != "entries"}
    shown["entries"] = len(manifest["entries"])
    shown["epilogue"] = epilogue.to_json()
    print(json.dumps(shown, indent=2))
    return 0


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
