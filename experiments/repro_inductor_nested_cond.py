"""Inductor computes a wrong result for an exact exported program with conds nested in cond
arms (torch 2.14.1, CPU): LongCat-Flash's experts loop (transformers 5.23.0).

The experts module loops over the experts ``nonzero()`` reports hit and ``continue``s when
an expert got no token. stitch exports it as a cond per expert (was it hit?) holding a cond
(did ``torch.where`` find its tokens?), each arm carrying ``final_hidden_states`` out with
``index_add_``. The exported program is exact against eager. This script saves it, loads it
back with ``torch.export.load`` (from here on only torch runs) and compiles it three ways:
``aot_eager_decomp_partition`` (Dynamo + AOTAutograd with Inductor's decompositions) is
exact; Inductor and AOTInductor are far off (2026-11-27: 46.2 max abs). So the fault is in
Inductor's lowering of the arms, not in export or in stitch. stitch's selection refuses
such builds for wrong results (tests/lower/test_miscompiled_arms.py). Run again on
2026-12-06 (f318196), with Inductor's caches off, all four are exact, with or without
stitch's lowering fixes: the graph stitch exports for this module no longer meets the fault
(which change of stitch's made that was not traced). Not reported upstream.

Usage: python experiments/repro_inductor_nested_cond.py [out.pt2]   (about two minutes)
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import torch
from transformers.models.longcat_flash import modeling_longcat_flash as longcat

import stitch


def exported(path: Path):
    config = SimpleNamespace(expert_ffn_hidden_size=8, hidden_size=16, n_routed_experts=4,
                             zero_expert_num=2, hidden_act="silu")
    torch.manual_seed(0)
    experts = longcat.LongcatFlashExperts(config)
    torch.nn.init.normal_(experts.gate_up_proj)
    torch.nn.init.normal_(experts.down_proj)
    hidden, weights = torch.randn(5, 16), torch.rand(5, 2)
    chosen = torch.tensor([[0, 4], [1, 0], [5, 1], [0, 1], [4, 5]])  # 4, 5: identity experts
    other = ((torch.randn(5, 16), torch.tensor([[2, 3]] * 5), weights), {})
    program = stitch.export(experts, (hidden, chosen, weights), examples=[other])
    torch.export.save(program.exported_program, path)
    with torch.no_grad():
        return (hidden, chosen, weights), experts(hidden, chosen, weights)


def main() -> None:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else
                Path(tempfile.mkdtemp()) / "longcat_experts.pt2")
    args, want = exported(path)
    torch._dynamo.config.capture_dynamic_output_shape_ops = True
    torch._dynamo.config.capture_scalar_outputs = True
    ep = torch.export.load(path)
    with torch.no_grad():
        runs = {"exported program": lambda: ep.module()(*args)[0]}
        for backend in ("aot_eager_decomp_partition", "inductor"):
            compiled = torch.compile(ep.module(), backend=backend, fullgraph=True,
                                     dynamic=False)
            runs[backend] = lambda compiled=compiled: compiled(*args)[0]
        runs["aotinductor"] = lambda: torch._inductor.aoti_load_package(
            torch._inductor.aoti_compile_and_package(ep))(*args)[0]
        for name, run in runs.items():
            torch._dynamo.reset()
            print(f"{name:28s} max abs error vs eager: {(run() - want).abs().max().item():.4g}",
                  flush=True)
    print(f"program saved at {path}")


if __name__ == "__main__":
    main()
