"""A reshape that folds areas into the batch (``(B, N, C) -> (B * 4, N // 4, C)``,
ultralytics' area attention ``AAttn`` in YOLO12) makes torch.export (non-strict, torch
2.14.1) guard ``4 * B * (N // 4) != N`` when traced at batch 2: the program refuses every
batch-1 input whose area count divides ``N`` (each image size YOLO12 takes), with no stitch
code. Traced at batch 1, the batch is specialised to 1 instead (0/1 specialisation).
Exported under ``torch.fx.experimental._config.backed_size_oblivious``, torch makes no
guard on a size being 1 inside its own ops, and the one program serves both batches.

stitch traces a batch-1 first example on the next example that differs there (the batch-1
rule); where an example of size 0 or 1 then fails a guard, it exports again under
``backed_size_oblivious`` (stitch/pipeline.py) and verifies every example.

Measured 2026-12-04 (torch 2.14.1+cu130, traced on 2x8x4x4, batch and spatial ``Dim.AUTO``):
2x8x6x6 and 3x8x20x20 match eager; 1x8x4x4 and 1x8x20x20 raise ``Guard failed: 4 *
x.size()[0] * (x.size()[3] * x.size()[2] // 4) != x.size()[3] * x.size()[2]``. Under
``backed_size_oblivious``, all four match eager.

Usage: python experiments/repro_reshape_batch1.py   (a few seconds)
"""

from __future__ import annotations

import torch
from torch.export import Dim


class AreaFold(torch.nn.Module):
    def forward(self, x):
        b, c, h, w = x.shape
        n = h * w
        q = x.flatten(2).transpose(1, 2).reshape(b * 4, n // 4, c)  # areas into the batch
        q = q.softmax(-1)
        return q.reshape(b, n, c).transpose(1, 2).reshape(b, c, h, w)


def main() -> None:
    import torch.fx.experimental._config as fx_config

    for oblivious in (False, True):
        print(f"backed_size_oblivious={oblivious}:")
        with fx_config.patch(backed_size_oblivious=oblivious):
            _check()


def _check() -> None:
    model = AreaFold()
    ep = torch.export.export(model, (torch.randn(2, 8, 4, 4),), strict=False,
                             dynamic_shapes=({0: Dim.AUTO, 2: Dim.AUTO, 3: Dim.AUTO},))
    for shape in [(2, 8, 6, 6), (3, 8, 20, 20), (1, 8, 4, 4), (1, 8, 20, 20)]:
        x = torch.randn(*shape)
        try:
            same = torch.allclose(ep.module()(x), model(x))
            print(f"  {shape}: {'matches eager' if same else 'DIFFERS from eager'}")
        except AssertionError as e:  # torch's guard: the program refuses the input
            print(f"  {shape}: refused: {e}")


if __name__ == "__main__":
    main()
