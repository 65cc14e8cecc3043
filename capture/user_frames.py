"""The line of the user's code an error came from: the innermost frame of its traceback (and
of the errors it was raised from) that is neither torch's, stitch's nor Python's own.

A failure deep inside torch.export names torch's internals; the refusal names the model's
line that was being traced when it happened (``model.py:42``), which for a rewritten
function is the line of the original statement the rewrite kept.
"""

from __future__ import annotations

import contextlib
import os
import sysconfig
import traceback
from collections.abc import Iterator

import torch

from .errors import error_chain

_HERE = os.path.dirname(os.path.abspath(__file__))  # capture/
_OWN = tuple(d + os.sep for d in (
    os.path.dirname(os.path.abspath(torch.__file__)), _HERE,
    os.path.join(os.path.dirname(_HERE), "stitch")))
_STDLIB = os.path.abspath(sysconfig.get_paths()["stdlib"]) + os.sep


def _is_user(filename: str) -> bool:
    if filename.startswith("<"):
        return False
    path = os.path.abspath(filename)
    return not path.startswith(_OWN) and not (
        path.startswith(_STDLIB) and "site-packages" not in path)


def user_line(error: BaseException) -> str | None:
    """``file:line`` of the innermost user frame among ``error``'s traceback and those of
    the errors it was raised from or while handling; None where there is none."""
    found = None
    for err in reversed(list(error_chain(error))):  # the innermost cause's frames last: they win
        for frame in traceback.extract_tb(err.__traceback__):
            if _is_user(frame.filename):
                found = f"{frame.filename}:{frame.lineno}"
    return found


@contextlib.contextmanager
def skipped_by_torch(path: str) -> Iterator[None]:
    """Within: torch, finding the model's line (an ``assert``'s frame, a failure's user
    stack) by skipping the files it lists as its own, skips ``path`` too (a mode stitch
    traces under, whose frame is between the model's line and torch)."""
    from torch.fx.experimental.symbolic_shapes import uninteresting_files

    ours = {path} - uninteresting_files()
    uninteresting_files().update(ours)
    try:
        yield
    finally:
        uninteresting_files().difference_update(ours)
