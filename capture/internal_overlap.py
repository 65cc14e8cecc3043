"""``copy_``'s check that its destination has no two elements in one memory location, made
at the traced sizes without a guard where it finds none, while stitch traces.

An in-place write into a view (``y[:, 2::3] = y[:, 2::3].sigmoid()``: YOLO's keypoint
decoding) runs ``copy_``, whose fake kernel raises where the destination overlaps itself
(``torch._debug_has_internal_overlap``). On symbolic sizes that question is asked through
the sizes, and under ``backed_size_oblivious`` (stitch's export for an example of batch 1,
pipeline.py) it records the assumption it makes as a guard: ``batch >= 2``, which refuses
the very example the retry was for. The answer only decides whether to raise an error; no
value depends on it.

While ``overlap_at_hints()`` is active the check is first made at the traced sizes with
guards suppressed. Where it finds no overlap there, and no stride of the destination is 0
(the only way a view shares memory among its elements that a size can turn on), that is the
answer, with no guard. Otherwise (an overlap, or a stride of 0) torch's own check runs as
before, with its guards and its error. The patch is re-entrant and undone when the last
user leaves.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode, guard_or_false

from .reentrant import Reentrant

_ORIGINAL = torch._debug_has_internal_overlap
_PATCH = Reentrant()
_YES = 1  # at::MemOverlap::Yes


def _at_hints(tensor) -> int:
    mode = torch._guards.detect_fake_mode(tensor) if isinstance(tensor, torch.Tensor) else None
    env = getattr(mode, "shape_env", None)
    if env is None:
        return _ORIGINAL(tensor)
    try:
        with env.suppress_guards():
            found = _ORIGINAL(tensor)
            # a stride from data is not taken for 0 (guard_or_false raises on none)
            zero_stride = any(guard_or_false(s == 0) for s in tensor.stride())
    except GuardOnDataDependentSymNode:  # a size from data: torch's check, as before
        return _ORIGINAL(tensor)
    return found if found != _YES and not zero_stride else _ORIGINAL(tensor)


@contextlib.contextmanager
def overlap_at_hints() -> Iterator[None]:
    with _PATCH.active((torch, "_debug_has_internal_overlap", _at_hints)):
        yield
