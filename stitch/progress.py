"""Which stage an export is in, and how long each stage took.

An export of a real model takes from seconds to minutes. Each stage of the pipeline runs
under ``stage(name)``: its time is added to the export's ``seconds`` (the report's
``seconds``, ``--json``'s too), and, once the export has run longer than ``AFTER_S`` on a
terminal, one line on stderr says which stage it is in and for how long, rewritten in place
and cleared when the export ends::

    stitch.export: census (torch.compile on every example) 14 s

Nothing is written when stderr is not a terminal, when ``Settings.progress`` is False, or
with ``STITCH_PROGRESS=0``. The line is written by a daemon thread to the process's own
stderr (``sys.__stderr__``), which ``capture.quiet`` leaves alone in other threads.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import threading
import time
from collections.abc import Iterator

AFTER_S = 3.0  # an export quicker than this shows nothing
TICK_S = 1.0

_CURRENT: contextvars.ContextVar[_Export | None] = contextvars.ContextVar(
    "stitch_progress", default=None)

WHAT = {  # stage -> what it does, as the progress line says it
    "state": "Python state analysis (eager runs of every example)",
    "warm-up": "eager run of every example",
    "census": "census (torch.compile on every example)",
    "rewrite": "rewriting the breaking functions",
    "export": "torch.export",
    "verify": "verification against eager",
}


class _Export:
    def __init__(self, seconds: dict[str, float], show: bool):
        self.seconds = seconds
        self.start = time.perf_counter()
        self.stage: tuple[str, float] | None = None
        self.shown = False
        self.done = threading.Event()
        self.thread = None
        if show:
            self.thread = threading.Thread(target=self._tick, name="stitch-progress",
                                           daemon=True)
            self.thread.start()

    def _tick(self) -> None:
        while not self.done.wait(TICK_S):
            now = time.perf_counter()
            current = self.stage
            if current is None or now - self.start < AFTER_S:
                continue
            name, since = current
            self._write(f"stitch.export: {WHAT.get(name, name)} {now - since:.0f} s "
                        f"({now - self.start:.0f} s in all)")

    def _write(self, text: str) -> None:
        stream = sys.__stderr__
        if stream is None:
            return
        try:
            stream.write("\r\x1b[2K" + text)
            stream.flush()
            self.shown = True
        except (OSError, ValueError):
            pass

    def close(self) -> None:
        self.done.set()
        if self.thread is not None:
            self.thread.join()
        if self.shown:
            self._write("")
            with contextlib.suppress(OSError, ValueError):
                sys.__stderr__.write("\r")
                sys.__stderr__.flush()


def _wanted(enabled: bool) -> bool:
    if not enabled or os.environ.get("STITCH_PROGRESS", "1") in {"0", "false", "no"}:
        return False
    stream = sys.__stderr__
    try:
        return stream is not None and stream.isatty()
    except (OSError, ValueError):
        return False


@contextlib.contextmanager
def export_progress(seconds: dict[str, float], enabled: bool = True) -> Iterator[None]:
    """One export: stages inside it add their time to ``seconds``; the progress line shows
    on a terminal (see the module's doc). Nested exports (a retry) share the outer one."""
    if _CURRENT.get() is not None:
        yield
        return
    state = _Export(seconds, _wanted(enabled))
    token = _CURRENT.set(state)
    try:
        yield
    finally:
        _CURRENT.reset(token)
        state.close()


def export_seconds() -> dict[str, float]:
    """The running export's stage times (a fresh dict outside an export)."""
    state = _CURRENT.get()
    return state.seconds if state is not None else {}


@contextlib.contextmanager
def stage(name: str, seconds: dict[str, float] | None = None) -> Iterator[None]:
    """Time one stage: added to ``seconds`` (or to the export's), shown on the progress
    line while it runs. Stages may nest; the line shows the innermost."""
    state = _CURRENT.get()
    into = seconds if seconds is not None else (state.seconds if state else None)
    before = state.stage if state else None
    t0 = time.perf_counter()
    if state is not None:
        state.stage = (name, t0)
    try:
        yield
    finally:
        if into is not None:
            into[name] = into.get(name, 0.0) + time.perf_counter() - t0
        if state is not None:
            state.stage = before
