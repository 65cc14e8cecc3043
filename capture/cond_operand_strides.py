"""A cond's operands laid out as its arms were compiled for, while stitch lowers.

Inductor compiles each arm of a ``torch.cond`` for its operands' traced strides (the arm
asserts them on entry), but lowers the operands themselves with whatever layout it chooses
(``ir.Switch.create``, torch 2.14.1: ``realize_input`` alone, where ``ir.WhileLoop.create``
requires the exact strides of its inputs). An operand torch.export traced as a transposed view
(``(66560, 65, 4160, 1)``) that Inductor computes contiguous (``(66560, 1040, 65, 1)``) then
fails the arm's check on every call: ``AssertionError: expected size 64==64, stride 1040==65``
(LED's global attention: its scores, updated in place through a transposed view, are a cond
operand). While ``cond_operands_laid_out()`` is active, each tensor operand whose traced
strides hold no data-dependent size is given exactly those strides first (a copy where its
layout differs), as Inductor does for a while_loop's inputs. The patch is re-entrant and
undone when the last user leaves.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from .reentrant import Reentrant

_PATCH = Reentrant()
_ORIGINAL: list = []  # Inductor's Switch.create, found on first use


def _laid_out(operands: list) -> list:
    import torch
    from torch._inductor import ir
    from torch._inductor.virtualized import V
    from torch.fx.experimental.symbolic_shapes import has_free_unbacked_symbols

    traced = V.graph.current_node.args[-1]
    if len(traced) != len(operands):
        return operands
    out = []
    for operand, node in zip(operands, traced, strict=True):
        fake = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        if isinstance(operand, ir.TensorBox) and isinstance(fake, torch.Tensor) \
                and not has_free_unbacked_symbols(fake.stride()):
            operand = ir.ExternKernel.require_exact_strides(operand, fake.stride(),
                                                            allow_padding=False)
        out.append(operand)
    return out


def _create(cls, selector, branches, operands, *args, **kwargs):
    return _ORIGINAL[0](selector, branches, _laid_out(list(operands)), *args, **kwargs)


_CREATE = classmethod(_create)  # one object: the context is entered on every compiled call


@contextlib.contextmanager
def cond_operands_laid_out() -> Iterator[None]:
    from torch._inductor import ir

    if not hasattr(ir, "Switch"):  # another torch: it lowers conds as it does
        yield
        return
    if not _PATCH.depth:
        _ORIGINAL[:] = [ir.Switch.create]
    with _PATCH.active((ir.Switch, "create", _CREATE)):
        yield
