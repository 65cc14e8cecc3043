"""Why torchvision's RetinaNet, FCOS and SSD do not lower with Inductor (torch 2.14.1, CPU),
on a model of the same shape: per-level top-k of scores a threshold keeps (``k = min(1000,
n)``, n known only at run time), then ``torchvision.ops.batched_nms``.

stitch makes it one verified graph (batched NMS's size test ``4*(Min(1000, u0) + ...) >
4000`` as a cond). Inductor re-traces the graph, rebuilds that size expression with
``proxy_tensor._nary_sym_min`` (a plain function, no lowering) and fails:
"<function _nary_sym_min> is not an OpOverload".

``--lowering`` registers a lowering for it (sympy ``Min`` of its operands, as Inductor
lowers the binary ``torch.sym_min``). Inductor then builds the graph, but its program
returned 0 boxes where the graph run eagerly gives 762 (2026-11-26): stitch's verification
refuses it, so stitch ships no such lowering. Not traced further.

Usage: python experiments/repro_nary_min.py [--lowering]   (about a minute)
"""

from __future__ import annotations

import sys

import torch
import torchvision

import stitch


class TopkPerLevelNms(torch.nn.Module):
    def forward(self, scores, boxes):
        kept_boxes, kept_scores, levels = [], [], []
        for level in range(scores.shape[0]):
            s = scores[level]
            keep = (s > 0.5).nonzero()[:, 0]
            top, at = s[keep].topk(min(1000, keep.shape[0]))
            kept_boxes.append(boxes[level][keep[at]])
            kept_scores.append(top)
            levels.append(torch.full_like(at, level))
        b, s, i = torch.cat(kept_boxes), torch.cat(kept_scores), torch.cat(levels)
        keep = torchvision.ops.batched_nms(b, s, i, 0.5)
        return b[keep], s[keep]


def inputs(n: int, g: torch.Generator):
    xy = torch.rand(3, n, 2, generator=g) * 100
    wh = 5 + torch.rand(3, n, 2, generator=g) * 20
    return torch.rand(3, n, generator=g), torch.cat([xy, xy + wh], -1)


def register_lowering() -> None:
    import sympy
    from torch._inductor.lowering import register_lowering
    from torch.fx.experimental.proxy_tensor import _nary_sym_min
    from torch.utils._sympy.functions import Min

    def expr(v):
        return v.node.expr if isinstance(v, torch.SymInt) else sympy.sympify(v)

    register_lowering(_nary_sym_min)(lambda *args: Min(*(expr(a) for a in args)))


def main() -> int:
    g = torch.Generator().manual_seed(0)
    model = TopkPerLevelNms()
    small, large = inputs(600, g), inputs(1500, g)
    program = stitch.export(model, small, examples=[(large, {})])
    print("stitched graph:", program.report.graph_ops)
    if "--lowering" in sys.argv:
        register_lowering()
    try:
        compiled = stitch.compile(program, "inductor")
        print("inductor built and verified:", compiled.decision.chosen)
    except Exception as e:  # noqa: BLE001
        print(f"inductor: {type(e).__name__}: {str(e)[:300]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
