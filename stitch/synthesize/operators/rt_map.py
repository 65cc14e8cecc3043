"""A loop over a tensor's rows whose only outputs are lists grown by one item per row
(``convert/stacked_lists.py``): torch's ``map`` over the rows, traced; the items stacked."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch._higher_order_ops.map import map as map_rows

from .rt_values import fresh


def mapped(seq: torch.Tensor, body_fn: Callable) -> tuple:
    """``body_fn`` on each row of ``seq`` (its length known only at run time), each output
    stacked along a new first dimension."""
    def each(row):
        return fresh(tuple(body_fn(row)), (row,))

    return tuple(map_rows(each, seq))


def stacked(items: Any, dim: int) -> torch.Tensor:
    """``torch.stack(items, dim)``: ``items`` a list, or the rows ``mapped`` stacked already
    along the first dimension."""
    if isinstance(items, torch.Tensor):
        return items.movedim(0, dim)
    return torch.stack(items, dim)


def rows(tensor: Any, *args: Any, **kwargs: Any) -> Any:
    """``tensor.unbind(...)`` iterated: the tensor itself where that is ``unbind(0)``
    (iterating a tensor gives the same rows), so a loop over it sees the tensor and its
    length, known only at run time; anything else, ``unbind`` as called."""
    dim = args[0] if args else kwargs.get("dim", 0)
    if isinstance(tensor, torch.Tensor) and tensor.dim() > 0 and len(args) + len(kwargs) <= 1 \
            and set(kwargs) <= {"dim"} and isinstance(dim, int) \
            and dim in (0, -tensor.dim()):
        return tensor
    return tensor.unbind(*args, **kwargs)
