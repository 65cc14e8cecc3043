"""Copies of the model that share its parameters, with every in-place write caught.

stitch runs the model on deep copies (``isolation.model_copy``): one to rewrite, one per
analysis of its Python state, one per verification, one per forced side. For a model of
any size, allocating the copy's weights is most of what a copy costs (a 12-layer BERT's
70 MB: 0.1-0.5 s per copy, mostly fresh pages), and a forward almost never writes its
parameters. So an export runs with the parameters shared (``shared_or_copied``): while it
runs, ``model_copy`` leaves each parameter of the user's model as it is, and the user's
values are kept aside once. A write cannot be caught as it happens (a write through
``.data`` or a kernel's own update moves no version counter), so it is caught by its
result: when the attempt ends, each parameter is compared bit for bit with the value kept
(and its storage with where it was: ``p.data = t`` swaps it). A parameter that differs is
put back, and the whole attempt runs again with copies of their own, as if nothing had
been shared. Nothing computed while one run could see another's write is kept, with one
limit: a write a later run undoes bit for bit (one call doubles a weight, the next halves
it) is not seen.

The program an export returns shares these parameters with the model, as
``torch.export``'s own program does: the graph never writes them, and a later in-place
change of the model's weights (training it further) shows in the program.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import TypeVar

import torch

T = TypeVar("T")

# id -> parameter, for the export running now (model_copy keeps these as they are)
_SHARED: contextvars.ContextVar[dict[int, torch.Tensor] | None] = contextvars.ContextVar(
    "stitch_shared_parameters", default=None)


def shared_parameters() -> dict[int, torch.Tensor]:
    """The parameters copies keep sharing now (empty outside ``shared_or_copied``)."""
    return _SHARED.get() or {}


class _Kept:
    """Each parameter with its place and a copy of its value."""

    def __init__(self, model: torch.nn.Module) -> None:
        params = {id(p): p for p in model.parameters()}.values()  # a tied weight once
        self.kept = [(p, _where(p), p.detach().clone()) for p in params]

    def put_back(self) -> bool:
        """Every parameter a run wrote, back to its value; whether there was one."""
        written = False
        with torch.no_grad():
            for p, where, value in self.kept:
                if _where(p) != where:  # its data swapped for another tensor
                    p.data = value
                elif not _same_bits(p, value):
                    p.copy_(value)
                else:
                    continue
                written = True
        return written


def _where(p: torch.Tensor) -> tuple:
    return (p.data_ptr(), tuple(p.shape), tuple(p.stride()), p.dtype, p.device)


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal bit for bit (a NaN kept equals itself; -0.0 is not 0.0); of any rank, a 0-d
    scale included (flattened first: a 0-d tensor has no bytes dimension to view)."""
    a, b = a.detach(), b.detach()
    if a.dtype.is_floating_point or a.dtype.is_complex:
        a, b = (t.contiguous().reshape(-1).view(torch.uint8) for t in (a, b))
    return torch.equal(a, b)


def shared_or_copied(model: torch.nn.Module, attempt: Callable[[], T]) -> T:
    """``attempt()`` with copies of ``model`` sharing its parameters; where any run wrote
    one, the parameters are put back and ``attempt()`` runs again, each copy with its own."""
    if not isinstance(model, torch.nn.Module) or _SHARED.get() is not None:
        return attempt()
    kept = _Kept(model)
    token = _SHARED.set({id(p): p for p, *_ in kept.kept})
    try:
        result = attempt()
    except BaseException:
        _SHARED.reset(token)
        if not kept.put_back():
            raise
    else:
        _SHARED.reset(token)
        if not kept.put_back():
            return result
    # a run wrote a parameter in place: nothing computed since is kept
    token = _SHARED.set({})
    try:
        return attempt()
    finally:
        _SHARED.reset(token)
