"""Where one ``stitch.export`` spends its time, call by call: each Dynamo census (its
duration, Dynamo's capture flags while it ran, and whether it failed), each torch.export
of the rewritten model, and the time torch.cond and torch.while_loop spend compiling their
functions with Dynamo on every call outside Dynamo (``_hop_compile_and_call``).

    python experiments/export_calls.py ARCH SIZE [--log FILE]

ARCH and SIZE are ``export_cost.py``'s (``longformer tiny``, ``detection tiny``). One
export, one process; the calls go to FILE as they end (written to its descriptor: a print
while stitch traces would be one of the model's effects to stitch), and to stderr with a
summary once the export is done. Timings include the wrapping's own cost (a clock read per
call). The counts are the point: how many censuses an export takes, and how many fail.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import sys
import time
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]


def _wrapped(module_name: str, attr: str, record, users: tuple[str, ...] = ()):
    """Replace ``module.attr`` (and the same object bound in ``users``) by a wrapper that
    calls ``record(seconds, error)`` when an outermost call ends; returns what puts the
    originals back."""
    module = importlib.import_module(module_name)
    original = getattr(module, attr)
    depth = [0]

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        depth[0] += 1
        start, error = time.perf_counter(), None
        try:
            return original(*args, **kwargs)
        except BaseException as e:
            error = e
            raise
        finally:
            depth[0] -= 1
            if depth[0] == 0:
                record(time.perf_counter() - start, error)

    bound = [module] + [m for m in map(importlib.import_module, users)
                        if getattr(m, attr, None) is original]
    for owner in bound:
        setattr(owner, attr, wrapper)
    return lambda: [setattr(owner, attr, original) for owner in bound]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("arch")
    parser.add_argument("size")
    parser.add_argument("--log", default="", help="file for the per-call lines")
    opts = parser.parse_args(argv)

    import export_cost
    import torch

    import stitch

    log = os.open(opts.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC) if opts.log else None
    lines: list[str] = []
    totals: dict[str, list] = defaultdict(lambda: [0, 0, 0.0])  # calls, failed, seconds

    def recorder(kind: str, flags: bool = False):
        def record(seconds: float, error: BaseException | None) -> None:
            total = totals[kind]
            total[0] += 1
            total[1] += error is not None
            total[2] += seconds
            extra = ""
            if flags:
                config = torch._dynamo.config
                extra = (f" capture shapes={int(config.capture_dynamic_output_shape_ops)}"
                         f" scalars={int(config.capture_scalar_outputs)}")
            what = "ok" if error is None else \
                f"{type(error).__name__}: {' '.join(str(error).split())[:160]}"
            lines.append(f"{seconds:7.2f}s {kind}{extra} {what}")
            if log is not None:
                os.write(log, (lines[-1] + "\n").encode())
        return record

    undo = [
        _wrapped("capture.explain", "explain", recorder("census", flags=True),
                 ("capture", "stitch.synthesize.convert.censuses", "stitch.plain_export")),
        _wrapped("stitch.exporting", "export_model", recorder("torch.export"),
                 ("stitch.rewrite_export",)),
        _wrapped("torch._higher_order_ops.utils", "_hop_compile_and_call",
                 recorder("cond/while_loop Dynamo compile")),
    ]
    model, examples, _ = export_cost.build(opts.arch, opts.size)
    (args, kwargs), rest = examples[0], examples[1:]
    start = time.perf_counter()
    try:
        program = stitch.export(model, args, kwargs, examples=rest)
    finally:
        for put_back in undo:
            put_back()
    total = time.perf_counter() - start
    lines.append(f"\n{opts.arch} {opts.size}: stitch.export {total:.1f} s; report stages "
                 f"{program.report.seconds}")
    lines += [f"  {kind}: {calls} call(s), {failed} failed, {seconds:.1f} s"
              for kind, (calls, failed, seconds) in totals.items()]
    print("\n".join(lines), file=sys.stderr)
    if log is not None:
        os.write(log, ("\n".join(lines[-len(totals) - 1:]) + "\n").encode())
        os.close(log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
