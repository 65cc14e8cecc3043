"""How far a lowered graph's outputs are from the reference's: the number every backend check
reports (the ONNX side checks here, profiling and saving in deploy)."""

from __future__ import annotations

import torch
import torch.utils._pytree as pytree


def max_error(a, b) -> float:
    """The greatest absolute difference between the floating-point tensors of two outputs of
    the same structure; AssertionError (``torch.testing.assert_close``'s) where they differ
    beyond its tolerances."""
    worst = 0.0
    for x, y in zip(pytree.tree_leaves(a), pytree.tree_leaves(b), strict=True):
        if isinstance(x, torch.Tensor):
            torch.testing.assert_close(y.cpu(), x.cpu())
            if x.numel() and x.is_floating_point():
                worst = max(worst, (y.cpu().double() - x.cpu().double()).abs().max().item())
    return worst
