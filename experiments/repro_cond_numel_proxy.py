"""AOTInductor (and the ONNX exporter) cannot re-trace a cond arm that counts the elements of an
operand whose size is a sum of data-dependent sizes.

Per level the top ``min(100, n)`` scores over a threshold, as boxes of 4, concatenated: the
boxes' count is ``4*Min(100, u0) + 4*Min(100, u1) + 4*Min(100, u2)``. A cond on that count
whose arm tests ``boxes.numel() == 0`` (torchvision's batched NMS) exports, and Inductor
builds it with stitch's lowering of ``_nary_sym_min`` (``experiments/repro_nary_min.py``), but
AOTInductor's re-trace of the arm finds no proxy for the count: "RuntimeError: 4*Min(100, u0)
+ ... is not tracked with proxy". No stitch involved. stitch writes each ``aten.sym_numel`` as
the product of the tensor's sizes, which the re-trace does track (``stitch/lower/sym_ops.py``).
Run: python experiments/repro_cond_numel_proxy.py [--as-sizes]   (about 20 s)
"""

import sys
import tempfile

import torch


def empty_or_doubled(c):
    return torch.cond(torch.full((), c.numel() == 0), lambda c: c.new_zeros(c.shape),
                      lambda c: c * 2, (c,))


class TopkPerLevel(torch.nn.Module):
    def forward(self, s):
        boxes = []
        for level in range(3):
            keep = (s[level] > 0.5).nonzero()[:, 0]
            top = s[level][keep].topk(min(100, keep.shape[0])).values
            boxes.append(top[:, None].expand(-1, 4) * 1)
        boxes = torch.cat(boxes)
        return torch.cond(torch.full((), boxes.numel() > 800), empty_or_doubled,
                          lambda c: c - 1, (boxes,))


if __name__ == "__main__":
    s = torch.rand(3, 300, generator=torch.Generator().manual_seed(0))
    ep = torch.export.export(TopkPerLevel(), (s,))
    if "--as-sizes" in sys.argv:
        sys.path.insert(0, __file__.rsplit("/experiments/", 1)[0])
        from stitch.lower.sym_ops import numel_as_sizes

        print("counts written as sizes:", numel_as_sizes(ep.graph_module))
    with tempfile.TemporaryDirectory() as d:
        try:
            path = torch._inductor.aoti_compile_and_package(ep, package_path=f"{d}/m.pt2")
            out = torch._inductor.aoti_load_package(path)(s)
            torch.testing.assert_close(out, TopkPerLevel()(s))
            print(f"torch {torch.__version__}: AOTInductor built it, same values as eager")
        except Exception as e:  # noqa: BLE001 - the failure is what this shows
            print(f"torch {torch.__version__}: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
