"""After a cond: an attribute the branch updated, written back to its owner
(``write_back``), or held while the model runs so later reads see it (``hold_state``)."""

from __future__ import annotations

import contextlib
import sys
from typing import Any

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true

from .rt_state import is_tracing
from .site_marks import exporting_now


def hold_state(owner: Any, attr: str, value: Any) -> None:
    """After a cond: an attribute of an object from outside the function that the cond
    carries (``carried_state.carried_state``) holds its new value while the model runs or is
    traced, so every later read sees it (a loop's next pass around the branch too); the set
    itself is replayed after the graph. Not inside another cond's arm or a loop's body
    (traced by Dynamo, which refuses a write outside the arm, or run on fake tensors for
    their metadata, whose values no trace holds), nor under the census's Dynamo: the reads
    after the branch there read the carried name."""
    if not torch.compiler.is_dynamo_compiling() and not _in_arm(sys._getframe(1)):
        setattr(owner, attr, value)


# the functions the converter makes of a cond's arms and a loop's body (a name inside a
# class is mangled: ``_Form__stitch_true_3``)
_ARMS = ("__stitch_true_", "__stitch_false_", "__stitch_body_")


def _in_arm(frame) -> bool:
    while frame is not None:
        if any(arm in frame.f_code.co_name for arm in _ARMS):
            return True
        frame = frame.f_back
    return False


def write_back(owner: Any, attr: str, value: Any, inplace: bool = False) -> None:
    """After a cond: write a branch-updated attribute back to its module. ``inplace`` (the
    branch updated it with ``+=`` and friends) copies into the existing tensor, as the
    original in-place op did; otherwise the attribute is rebound, as ``self.x = v`` did."""
    current = getattr(owner, attr, None)
    is_buffer = attr in getattr(owner, "_buffers", {})
    # shapes compared without a guard: a cached table's size against the size its arm
    # recomputes it at (``H * W`` rows against 144) is no test of the input
    same_meta = (isinstance(current, torch.Tensor) and isinstance(value, torch.Tensor)
                 and current.dim() == value.dim() and all(
                     statically_known_true(a == b) for a, b in zip(current.shape, value.shape,
                                                                   strict=True))
                 and current.dtype == value.dtype)
    # while exporting, a buffer must be mutated in place for torch.export to record it
    # (strict=True: Dynamo traces this; it drops a rebound buffer)
    exporting = is_buffer and (exporting_now() if torch.compiler.is_dynamo_compiling()
                               else is_tracing())
    if same_meta and (inplace or exporting):
        # no_grad only where autograd would refuse the in-place copy (a leaf that requires
        # grad, e.g. a Parameter): elsewhere it would put a grad-mode HOP around the copy
        context = torch.no_grad() if current.is_leaf and current.requires_grad else \
            contextlib.nullcontext()
        with context:
            current.copy_(value)
    else:
        setattr(owner, attr, value)
