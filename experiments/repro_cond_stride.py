"""``torch.cond`` cannot merge its arms' outputs when their strides hold ``Max(1, ...)``
(torch 2.14.1, non-strict torch.export, no stitch code): after a window partition and its
inverse (``view``/``transpose``/``reshape`` over ``H + pad``), the fake tensor's contiguous
strides are written with ``Max(1, size // 7)``, and cond's output merge
(``torch/_higher_order_ops/cond.py``, ``_bound_stride``) refuses them: "one of cond's output
stride is not a simple accumulative multiplication of sizes".

timm's TinyViT and Twins pad an image to a multiple of the window only where it is not one
(``padding = pad_b > 0 or pad_r > 0``; ``if padding: x = x[:, :H, :W]`` after the windows):
stitch keeps the first test a cond, and the second hits this; stitch then undoes the failed
trace and traces that cond again with its arms' outputs copied contiguous
(``stitch/synthesize/operators/rt_select.py``). The same
blocks with the crop written unconditionally (``x[:, :H, :W]`` is a no-op where nothing was
padded) export with any size.

Measured 2026-12-05 (torch 2.14.1+cu130, input 2x14x14x8, dims 0-2 ``Dim.AUTO``):
``RuntimeError: It seems one of cond's output stride is not a simple accumulative
multiplication of sizes``.

Usage: python experiments/repro_cond_stride.py   (a few seconds)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.export import Dim

WINDOW = 7


class WindowsThenCrop(torch.nn.Module):
    def forward(self, x):
        b, h, w, c = x.shape
        pad_b, pad_r = (WINDOW - h % WINDOW) % WINDOW, (WINDOW - w % WINDOW) % WINDOW
        padding = (pad_b > 0) | (pad_r > 0)
        x = torch.cond(padding, lambda t: F.pad(t, (0, 0, 0, pad_r, 0, pad_b)).clone(),
                       lambda t: t.clone(), (x,))
        ph, pw = h + pad_b, w + pad_r
        nh, nw = ph // WINDOW, pw // WINDOW
        x = x.view(b, nh, WINDOW, nw, WINDOW, c).transpose(2, 3).reshape(
            b * nh * nw, WINDOW * WINDOW, c) * 2
        x = x.view(b, nh, nw, WINDOW, WINDOW, c).transpose(2, 3).reshape(b, ph, pw, c)
        return torch.cond(padding, lambda t: t[:, :h, :w].clone(), lambda t: t.clone(), (x,))


def main() -> None:
    dims = ({0: Dim.AUTO, 1: Dim.AUTO, 2: Dim.AUTO},)
    try:
        torch.export.export(WindowsThenCrop(), (torch.randn(2, 14, 14, 8),),
                            dynamic_shapes=dims, strict=False)
        print("exported: torch merges the arms' strides")
    except Exception as e:  # noqa: BLE001 - the failure is what this script shows
        print(f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")


if __name__ == "__main__":
    main()
