"""How far a lowered graph's outputs are from the reference's: the number every backend check
reports (the ONNX side checks here, profiling and saving in deploy)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.utils._pytree as pytree

from .float64 import as_accurate


def max_error(a, b, exact: Callable[[], object] | None = None,
              accepted: list[str] | None = None) -> float:
    """The greatest absolute difference between the floating-point tensors of two outputs of
    the same structure; AssertionError (``torch.testing.assert_close``'s) where they differ
    beyond its tolerances, unless ``exact()`` gives the outputs of the graph run in float64
    and ``b``'s tensor is as accurate as ``a``'s against it (``float64.as_accurate``; what
    says so is appended to ``accepted``)."""
    worst = 0.0
    for i, (x, y) in enumerate(zip(pytree.tree_leaves(a), pytree.tree_leaves(b), strict=True)):
        if isinstance(x, torch.Tensor):
            try:
                torch.testing.assert_close(y.cpu(), x.cpu())
            except AssertionError as e:
                wide = exact() if exact is not None and x.is_floating_point() else None
                z = pytree.tree_leaves(wide)[i:i + 1] if wide is not None else ()
                if not (z and isinstance(z[0], torch.Tensor)):
                    why = getattr(exact, "why", lambda: "")()
                    if why:  # the float64 graph failed: assert_close decides, and says why
                        raise AssertionError(f"{e}\nNo yardstick in float64: the graph run in "
                                             f"float64 raised {why}") from None
                    raise  # no float64 counterpart: assert_close decides
                ok, numbers = as_accurate(x.cpu(), y.cpu(), z[0].cpu())
                if not ok:
                    raise AssertionError(f"{e}\nAgainst the graph run in float64: {numbers} "
                                         "(not as accurate as eager)") from None
                if accepted is not None:
                    accepted.append(f"output {i}: {numbers}")
            if x.numel() and x.is_floating_point():
                worst = max(worst, (y.cpu().double() - x.cpu().double()).abs().max().item())
    return worst
