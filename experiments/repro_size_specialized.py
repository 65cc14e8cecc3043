"""Python calls on sizes that make torch.export (non-strict, torch 2.14.1) fix the
dimensions they read, or their order, with no stitch code; all silently: the program raises
``Guard failed`` on any other size, where the model accepts it.

- ``x.shape.numel()``: ``torch.Size.numel`` turns each symbolic size into an int first, so
  every dimension of ``x`` is fixed (kornia's ``perform_keep_shape_image``:
  ``if input.shape.numel() == 0: raise ...``). ``x.numel()`` stays symbolic.
- ``float(n)`` of a size: the float of a symbolic int is made from its traced value
  (kornia's ``wf = float(max(w - 1, 1))``). ``torch.sym_float(n)`` stays symbolic.
- ``min(a, b)`` of two symbolic floats: torch.export's own ``min`` makes ``torch.sym_min``
  of a SymInt but leaves floats to Python's, whose comparison becomes a guard on the order of
  the traced sizes (kornia's ``min(hf, wf)``): a program traced on a wide image refuses tall
  ones. stitch's shim while it traces: ``synthesize/operators/sym_min_max.py``.

stitch rewrites the first two where torch.export decided a test or a count at that line
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


class MinOfFloatSizes(torch.nn.Module):
    def forward(self, x):
        h, w = torch.sym_float(x.shape[-2]), torch.sym_float(x.shape[-1])
        return x / min(h, w)


def tall_after_wide() -> str:
    """The program traced on a wide input, called on a tall one."""
    ep = torch.export.export(MinOfFloatSizes(), (torch.randn(1, 6, 9),),
                             dynamic_shapes=({1: Dim.AUTO, 2: Dim.AUTO},))
    try:
        ep.module()(torch.randn(1, 9, 6))
    except AssertionError as e:
        return f"raised: {str(e).splitlines()[0]}"
    return "ran"


def dynamic_dims(model: torch.nn.Module) -> str:
    x = torch.randn(2, 3, 8, 8)
    ep = torch.export.export(model, (x,), dynamic_shapes=({0: Dim.AUTO, 3: Dim.AUTO},))
    shape = next(n.meta["val"].shape for n in ep.graph.nodes if n.op == "placeholder")
    return str(list(shape))


def main() -> None:
    print(f"torch {torch.__version__}; input marked dynamic in dims 0 and 3")
    for model in (ShapeNumel(), TensorNumel(), FloatOfSize()):
        print(f"{type(model).__name__:12} traced input shape: {dynamic_dims(model)}")
    print(f"MinOfFloatSizes traced on 1x6x9, called on 1x9x6: {tall_after_wide()}")


if __name__ == "__main__":
    main()
