"""Two Python calls on sizes that make torch.export (non-strict, torch 2.14.1) fix the
dimensions they read as constants, with no stitch code; both silently: the program raises
``Guard failed`` on any other size, where the model accepts it.

- ``x.shape.numel()``: ``torch.Size.numel`` turns each symbolic size into an int first, so
  every dimension of ``x`` is fixed (kornia's ``perform_keep_shape_image``:
  ``if input.shape.numel() == 0: raise ...``). ``x.numel()`` stays symbolic.
- ``float(n)`` of a size: the float of a symbolic int is made from its traced value
  (kornia's ``wf = float(max(w - 1, 1))``). ``torch.sym_float(n)`` stays symbolic.

stitch rewrites both where torch.export decided a test or a count at that line
(``len_to_size.py``, ``rt_values.scalar``; docs/rewrites.md).

Measured 2026-12-04 (torch 2.14.1+cu130, input 2x3x8x8, dims 0 and 3 ``Dim.AUTO``): traced
input shapes ``ShapeNumel [2, 3, 8, 8]``, ``TensorNumel [s77, 3, 8, s0]``, ``FloatOfSize
[s77, 3, 8, 8]``.

Usage: python experiments/repro_size_specialized.py   (a few seconds)
"""

from __future__ import annotations

import torch
from torch.export import Dim


class ShapeNumel(torch.nn.Module):
    def forward(self, x):
        if x.shape.numel() == 0:
            raise ValueError("empty")
        return x * 2


class TensorNumel(torch.nn.Module):
    def forward(self, x):
        if x.numel() == 0:
            raise ValueError("empty")
        return x * 2


class FloatOfSize(torch.nn.Module):
    def forward(self, x):
        return x / float(max(x.shape[-1] - 1, 1))


def dynamic_dims(model: torch.nn.Module) -> str:
    x = torch.randn(2, 3, 8, 8)
    ep = torch.export.export(model, (x,), dynamic_shapes=({0: Dim.AUTO, 3: Dim.AUTO},))
    shape = next(n.meta["val"].shape for n in ep.graph.nodes if n.op == "placeholder")
    return str(list(shape))


def main() -> None:
    print(f"torch {torch.__version__}; input marked dynamic in dims 0 and 3")
    for model in (ShapeNumel(), TensorNumel(), FloatOfSize()):
        print(f"{type(model).__name__:12} traced input shape: {dynamic_dims(model)}")


if __name__ == "__main__":
    main()
