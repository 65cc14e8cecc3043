"""In-place writes in branches and loops over ``nonzero()``, at run time (``branch_inplace``,
``nonzero_loop``). Each helper does exactly what the Python it replaced did when its inputs
are not tensors."""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch.fx.experimental.symbolic_shapes import guard_or_false

from ...errors import StitchError


def in_place(target: Any, method: str, *args: Any, **kwargs: Any) -> Any:
    """``target.method(*args)`` on a copy, returned (the cond carries it out)."""
    if not isinstance(target, torch.Tensor):
        getattr(target, method)(*args, **kwargs)
        return target
    copy = target.clone()
    getattr(copy, method)(*args, **kwargs)
    return copy


def own(value: Any) -> Any:
    """A copy of a tensor for a branch to write as it likes (torch.cond forbids writing its
    operands, not what the branch made); anything else as it is."""
    return value.clone() if isinstance(value, torch.Tensor) else value


def set_item(target: Any, index: Any, value: Any) -> Any:
    """``target[index] = value`` on a copy, returned."""
    if not isinstance(target, torch.Tensor):
        target[index] = value
        return target
    copy = target.clone()
    copy[index] = value
    return copy


def _same_shape(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Shapes known equal, without a guard: a cond's output sized from data may carry a
    fresh symbol for the size its operand had (Dynamo), which no trace can compare; then
    the name takes the new tensor (what eager does when the arm rebinds it), and
    verification compares what every alias of the original holds."""
    return a.dim() == b.dim() and all(guard_or_false(x == y)
                                      for x, y in zip(a.shape, b.shape, strict=True))


def write_into(original: Any, new: Any, same_shape: bool = False) -> Any:
    """After the cond: ``original`` holds ``new``'s values (the eager in-place write reached
    that object); returns it, so the name is bound to the same object as in eager.
    ``same_shape``: ``new`` is a copy of ``original`` written in place by methods that keep
    shapes (``branch_inplace.keeps_shape``), so their sizes are equal; stated for a trace
    that gave the cond's output fresh sizes (Dynamo does, for sizes from data), which later
    code indexing the tensor needs."""
    if same_shape and isinstance(original, torch.Tensor) and isinstance(new, torch.Tensor) \
            and original.dim() == new.dim():
        for x, y in zip(original.shape, new.shape, strict=True):
            torch._check(x == y)
    if (original is new or not isinstance(original, torch.Tensor)
            or not isinstance(new, torch.Tensor) or not _same_shape(original, new)
            or original.dtype != new.dtype):
        return new
    context = torch.no_grad() if original.is_leaf and original.requires_grad else \
        contextlib.nullcontext()
    with context:
        original.copy_(new)
    return original


class KeptLoop(StitchError):
    """A rewritten loop that cannot run as rewritten; the round is built again with that loop
    left as written (``location``: its file:line)."""

    def __init__(self, message: str, location: str) -> None:
        super().__init__(message)
        self.location = location


class NotOneDimensional(KeptLoop):
    """A rewritten loop over nonzero() met a mask that is not 1-D."""


def mask_length(mask: Any, location: str = "") -> int:
    """How many indices a ``for row in mask.nonzero()`` loop may visit (1-D masks only)."""
    if not isinstance(mask, torch.Tensor) or mask.dim() != 1:
        shape = tuple(mask.shape) if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise NotOneDimensional(
            f"a loop over nonzero() of {shape}: stitch rewrites loops over the nonzero indices "
            "of a 1-D tensor only (each row one index). Loop over a 1-D mask, or over "
            "range(n) with `if mask[i]:`.", location)
    return mask.shape[0]


def is_set(mask: torch.Tensor, i: int) -> Any:
    """Whether index ``i`` is among ``mask.nonzero()`` (a 0-d bool tensor)."""
    return mask[i] != 0


def nonzero_row(mask: torch.Tensor, i: int) -> torch.Tensor:
    """The row ``mask.nonzero()`` yields for index ``i``: ``tensor([i])``."""
    return torch.full((1,), i, dtype=torch.long, device=mask.device)


def nonzero_index(mask: torch.Tensor, i: int) -> torch.Tensor:
    """The element ``mask.nonzero(as_tuple=True)[0]`` yields for index ``i``: ``tensor(i)``."""
    return torch.full((), i, dtype=torch.long, device=mask.device)


def by_row(container: Any, row: torch.Tensor, i: int) -> Any:
    """``container[row]`` for a row of ``nonzero()``: a tensor is indexed by the row (shape
    kept), anything else (a ModuleList, a list) by the int the row holds, as eager's
    ``operator.index(row)`` gives it."""
    if isinstance(container, torch.Tensor):
        return container[row]
    return container[i]
