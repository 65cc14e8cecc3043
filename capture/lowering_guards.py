"""Questions Inductor asks of data-dependent sizes, answered while stitch lowers.

Inductor decides some things about sizes with a plain ``bool()`` (a hard guard), where a size
known only at run time (an unbacked ``u``: ``.item()``, ``nonzero()``) makes torch raise
``GuardOnDataDependentSymNode`` and the whole build fail. While ``undecided_sizes_answered()``
is active, such a question gets an answer in two cases, and torch's error stands in every
other:

- **It holds by cases** of its ``Min``/``Max`` (``minmax_cases``): ``16*Max(1, u) >= u`` is
  true for every ``u``. Exact.
- **It only picks a layout** (``LAYOUT_QUESTIONS``): the function asking it chooses between
  using a tensor as it is laid out and copying it contiguous first, and either choice computes
  the same values. It gets the answer that takes the copy. Inductor's CPU ``bmm`` lowering
  (``torch/_inductor/kernel/bmm.py``, torch 2.14.1) asks ``sizes[-2] == 1 or strides[-2] >=
  sizes[-1]`` of each operand; for an operand with ``u`` rows that is ``Eq(u, 1)`` (LED's
  global attention, where the count of global tokens is read from the mask).

Neither answer is recorded as a guard: the program assumes nothing about ``u``. Every build
is verified against the stitched graph besides. The patch is re-entrant and undone when the
last user leaves. Reproduction without stitch: ``experiments/repro_bmm_unbacked.py``.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

import sympy

from .minmax_cases import decided_by_cases
from .reentrant import Reentrant

# (file ending, function) of each Inductor function whose size questions only choose a
# layout, and the answer that makes it take the contiguous copy
LAYOUT_QUESTIONS = {
    ("torch/_inductor/kernel/bmm.py", "is_preferred_layout_as_bmm_input"): sympy.false,
}
_FRAMES = 8  # how far up from ShapeEnv.evaluate_expr the asking function is looked for

_PATCH = Reentrant()
_WRAPPED: list = []  # the ShapeEnv.evaluate_expr this patch calls first, set on first use


def _evaluate(self, orig_expr, *args, **kwargs):
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    try:
        return _WRAPPED[0](self, orig_expr, *args, **kwargs)
    except GuardOnDataDependentSymNode:
        decided = decided_by_cases(self, orig_expr)
        if decided is None:
            decided = _layout_answer(sys._getframe(1))
        if decided is None:
            raise
        return decided


def _layout_answer(frame) -> sympy.Basic | None:
    for _ in range(_FRAMES):
        if frame is None:
            return None
        path = frame.f_code.co_filename.replace("\\", "/")
        for (ending, function), answer in LAYOUT_QUESTIONS.items():
            if frame.f_code.co_name == function and path.endswith(ending):
                return answer
        frame = frame.f_back
    return None


@contextlib.contextmanager
def undecided_sizes_answered() -> Iterator[None]:
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    if not _PATCH.depth:
        _WRAPPED[:] = [ShapeEnv.evaluate_expr]
    with _PATCH.active((ShapeEnv, "evaluate_expr", _evaluate)):
        yield
