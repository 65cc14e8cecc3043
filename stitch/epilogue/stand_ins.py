"""What the recorder and its stand-ins share: the recorder of the export in progress, the
frame of the model's code that made a call, and reads refused on a stand-in.

A stand-in (``RecordingList`` in record_lists.py, ``RecordingDict`` in record_items.py) holds
a list or dict the forward changes while it is traced; ``record.py`` records prints, logs and
warnings and prints a stand-in's text call by call."""

from __future__ import annotations

import os
import sys

from capture.source import is_user_file

from ..errors import UnsupportedSideEffectError

CURRENT: list = []  # the Recorder (record.py) of the export in progress, if any


def current_recorder():
    return CURRENT[-1] if CURRENT else None


def caller(depth: int = 2):
    """The frame that called the function calling this one."""
    frame = sys._getframe(depth)
    return frame


def where(frame) -> str:
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


# frames of torch's fake-tensor dispatch: code running beneath them is an operator's kernel
# evaluated on fake tensors while tracing (torchvision's NMS meta kernel warns that an API
# it calls is deprecated), not the model's forward, and does not run when the program does
_KERNEL_FILES = tuple(os.path.join("torch", *p) for p in (
    ("_subclasses", "fake_tensor.py"), ("_library", "fake_impl.py")))


def user_call(frame) -> bool:
    """Whether a print/log/warning made in ``frame`` is the model's: made in user code, and
    not by a kernel torch's tracer runs."""
    if not is_user_file(frame.f_code.co_filename):
        return False
    outer = frame.f_back
    while outer is not None:
        if outer.f_code.co_filename.endswith(_KERNEL_FILES):
            return False
        outer = outer.f_back
    return True


def refused_read(base: type, name: str, what: str):
    """``base``'s method ``name`` on a stand-in, refused where the model's code calls it
    (``what``: the refusal after the file:line; stitch's own calls pass): the traced program
    would read the container as it was when traced, never as the calls change it."""
    original = getattr(base, name, None) or getattr(object, name)

    def read(self, *args, **kwargs):
        frame = caller()
        if user_call(frame):
            raise UnsupportedSideEffectError(f"{where(frame)}: {what.format(self.target)}")
        return original(self, *args, **kwargs)

    read.__name__ = name
    return read
