"""Subprocess body of ``tensorrt_plan``: ``python -m stitch.deploy.tensorrt_probe EP MIN``."""

from __future__ import annotations

import json
import sys
from collections import Counter

import torch


def _stub_cuda_queries_without_gpu() -> None:
    # torch_tensorrt asks these at import; with no GPU they raise. Only here, only then.
    if not torch.cuda.is_available():
        torch.cuda.get_device_capability = lambda *a, **k: (0, 0)
        torch.cuda.current_device = lambda: 0


def _name(target) -> str:
    return getattr(target, "__name__", None) if not hasattr(target, "_schema") else str(target)


def main(path: str, min_block_size: int) -> None:
    _stub_cuda_queries_without_gpu()
    import torch_tensorrt
    from torch_tensorrt.dynamo import partitioning
    from torch_tensorrt.dynamo.conversion._ConverterRegistry import DYNAMO_CONVERTERS

    ep = torch.export.load(path).run_decompositions()
    gm = ep.module()
    ops = [n for n in gm.graph.nodes if n.op == "call_function"
           and str(n.target) not in ("<built-in function getitem>",)]
    unsupported = Counter(str(n.target) for n in ops if n not in DYNAMO_CONVERTERS)
    partitioned, _ = partitioning.fast_partition(gm, min_block_size=min_block_size)
    segments = []
    for name, sub in partitioned.named_children():
        if not isinstance(sub, torch.fx.GraphModule):
            continue
        sub_ops = [str(n.target) for n in sub.graph.nodes if n.op == "call_function"]
        if not sub_ops:
            continue
        engine = "tensorrt" if name.startswith("_run_on_acc") else "pytorch"
        missing = sorted({o for o in sub_ops if o in unsupported})
        why = ""
        if engine == "pytorch":
            why = ("no converter: " + ", ".join(missing)) if missing else \
                "segment below min_block_size"
        segments.append({"name": name, "engine": engine, "ops": sub_ops, "why": why})
    print("PLAN " + json.dumps({
        "ops_total": len(ops), "ops_supported": len(ops) - sum(unsupported.values()),
        "unsupported": dict(unsupported), "segments": segments,
        "version": torch_tensorrt.__version__, "gpu": torch.cuda.is_available()}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
