"""Why torchvision's RetinaNet, FCOS and SSD did not lower with Inductor (torch 2.14.1, CPU),
on a model of the same shape: per-level top-k of scores a threshold keeps (``k = min(1000,
n)``, n known only at run time), then ``torchvision.ops.batched_nms``.

stitch makes it one verified graph (batched NMS's size test ``4*(Min(1000, u0) + ...) >
4000`` as a cond, ``boxes.numel() == 0`` inside its arm). Inductor re-traced the arm, found
no proxy for the element count, rebuilt it from its sympy expression with
``proxy_tensor._nary_sym_min`` (a plain function, no lowering) and failed: "<function
_nary_sym_min> is not an OpOverload"; AOTInductor failed on the same count ("is not tracked
with proxy"). stitch now writes each element count as the product of sizes
(``stitch/lower/sym_ops.py``), which both build, and gives ``_nary_sym_min``/``_nary_sym_max``
a lowering while it lowers, for expressions rebuilt otherwise (``capture/nary_sym_ops.py``).
torch alone still fails on the raw export of ``experiments/repro_cond_numel_proxy.py``'s model
(``tests/lower/test_lowering_fixes.py``). This script shows the graph stitch returns building
with plain ``torch.compile`` and verifying with ``stitch.compile``. (An earlier lowering,
tried on an older stitch, gave 0 boxes where the graph gives 762; every build here is
verified exact on each example and forced side.)

Usage: python experiments/repro_nary_min.py   (about a minute)
"""

from __future__ import annotations

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


def main() -> int:
    g = torch.Generator().manual_seed(0)
    model = TopkPerLevelNms()
    small, large = inputs(600, g), inputs(1500, g)
    program = stitch.export(model, small, examples=[(large, {})])
    print("stitched graph:", program.report.graph_ops)
    try:
        torch.compile(program.exported_program.module(), fullgraph=True)(*small)
        print("torch.compile of the returned graph: built")
    except Exception as e:  # noqa: BLE001 - the failure is what this shows
        print(f"torch.compile of the returned graph: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
    compiled = stitch.compile(program, "inductor")
    print("stitch.compile: inductor built and verified:", compiled.decision.chosen)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
