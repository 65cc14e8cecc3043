"""Inductor lowers torch's n-ary symbolic min and max while stitch lowers.

When torch re-traces a graph and meets a size it has no proxy for, it rebuilds the size from
its sympy expression (``proxy_tensor._build_proxy_for_sym_expr``, torch 2.14.1). sympy's
``Min``/``Max`` are n-ary, so it writes them as calls of the plain functions
``proxy_tensor._nary_sym_min``/``_nary_sym_max`` (a reduction over the binary
``torch.sym_min``/``sym_max``). Inductor has a lowering for ``torch.sym_min`` and none for
those functions: every Inductor build of a graph whose cond predicate is such a size failed
with ``LoweringException: AssertionError: <function _nary_sym_min> is not an OpOverload``.
That is torchvision's detection post-processing: the per-level top-k of ``min(1000, n)``
boxes, summed, tested by batched NMS (``4*Min(1000, u0) + ... > 4000``): RetinaNet, FCOS,
SSD.

While ``nary_sym_ops_lowered()`` is active, both functions lower as Inductor lowers the
binary ones: to the node's traced value where it has one, else to sympy's ``Min``/``Max`` of
the operands. It is the same number the reduction computes, so nothing can change but
whether the build succeeds; every build is still verified against the stitched graph. The
lowerings are added only where Inductor has none, and removed when the last user leaves.
Reproduction without stitch: ``experiments/repro_nary_min.py``.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator

from .reentrant import Reentrant

_ADDED: list = []  # the functions this module gave a lowering, while a user is inside


def _remove_added() -> None:
    from torch._inductor.lowering import lowerings

    while _ADDED:
        lowerings.pop(_ADDED.pop(), None)


_PATCH = Reentrant(on_last_exit=_remove_added)


def _lowering(combine: Callable) -> Callable:
    def lower(*args):
        import sympy
        import torch
        from torch._inductor.virtualized import V

        node = V.graph.current_node
        traced = node.meta.get("val") if node is not None else None
        if isinstance(traced, torch.SymInt | torch.SymFloat):
            return traced.node.expr

        def expr(value):
            if isinstance(value, torch.SymInt | torch.SymFloat | torch.SymBool):
                return value.node.expr
            return value if isinstance(value, sympy.Basic) else sympy.sympify(value)
        return combine(*(expr(a) for a in args))
    return lower


@functools.cache
def _nary_lowerings() -> dict:
    """torch's n-ary functions, each with its lowering (the sympy function it stands for),
    where this torch has them; made once (the context is entered on every call of a
    compiled build)."""
    from torch.fx.experimental import proxy_tensor
    from torch.utils._sympy.functions import Max, Min

    pairs = (("_nary_sym_min", Min), ("_nary_sym_max", Max))
    return {getattr(proxy_tensor, name): _lowering(fn) for name, fn in pairs
            if hasattr(proxy_tensor, name)}


@contextlib.contextmanager
def nary_sym_ops_lowered() -> Iterator[None]:
    with _PATCH.active():
        if _PATCH.depth == 1:
            from torch._inductor.lowering import lowerings

            for function, lower in _nary_lowerings().items():
                if function not in lowerings:
                    lowerings[function] = lower
                    _ADDED.append(function)
        yield
