"""A write into a slice (``y[:, 2::3] = y[:, 2::3].sigmoid()``, YOLO's keypoint decoding)
exported under ``torch.fx.experimental._config.backed_size_oblivious`` with a dynamic batch
refuses batch 1: ``copy_``'s fake kernel asks ``torch._debug_has_internal_overlap`` whether
the destination overlaps itself, and under oblivious sizes torch records the assumption it
makes there as a guard, ``batch >= 2`` (torch 2.14.1, non-strict, no stitch code). Oblivious
sizes are what a batch-1 input needs elsewhere (experiments/repro_reshape_batch1.py), so the
two together serve no batch-1 input. The check only decides whether to raise an error; no
value depends on it.

stitch makes that check at the traced sizes with no guard where it finds no overlap and no
stride of 0 (capture/internal_overlap.py).

Measured 2026-12-07 (torch 2.14.1+cu130, traced on 2x6x4x4, batch and spatial ``Dim.AUTO``):
without ``backed_size_oblivious`` every shape tried matches eager; with it, 1x6x4x4 raises
``Guard failed: x.size()[0] >= 2`` and 2x6x4x4 and 3x6x5x7 match.

Usage: python experiments/repro_copy_overlap_oblivious.py   (a few seconds)
"""

from __future__ import annotations

import torch
from torch.export import Dim


class Keypoints(torch.nn.Module):
    def forward(self, x):
        y = x.flatten(2).clone()
        y[:, 2::3] = y[:, 2::3].sigmoid()  # copy_ into a strided slice
        return y * 2


def main() -> None:
    import torch.fx.experimental._config as fx_config

    for oblivious in (False, True):
        print(f"backed_size_oblivious={oblivious}:")
        with fx_config.patch(backed_size_oblivious=oblivious):
            model = Keypoints()
            ep = torch.export.export(model, (torch.randn(2, 6, 4, 4),), strict=False,
                                     dynamic_shapes=({0: Dim.AUTO, 2: Dim.AUTO, 3: Dim.AUTO},))
        for shape in [(1, 6, 4, 4), (2, 6, 4, 4), (3, 6, 5, 7)]:
            x = torch.randn(*shape)
            try:
                same = torch.allclose(ep.module()(x), model(x))
                print(f"  {shape}: {'matches eager' if same else 'DIFFERS from eager'}")
            except AssertionError as e:  # torch's guard: the program refuses the input
                print(f"  {shape}: refused: {e}")


if __name__ == "__main__":
    main()
