"""Quiet by default: what stitch tries and abandons goes to its debug log, not to stderr.

An export makes many attempts (torch.export of each candidate rewrite, conds traced and
dropped, probes), and torch reports each failure on stderr in its own way: the partial FX
graph of a failed export (``def forward(self, arg0_1 ...``), the traceback of a failing FX
module call ("Call using an FX-traced Module ..."), log records (``torch.export._trace``
logs ``always_classified is unsupported.`` at ERROR), warnings ("Pred is a Python
constant"). None of it is for the user: the export returns a program, or raises one
exception that says why.

``quiet()`` holds for one export. In the thread that runs it:

- records torch's loggers would write to the console go to the ``stitch.debug`` logger
  (their console handlers are put back on exit);
- Python warnings that reach the point of being shown go there too;
- writes to ``sys.stderr`` (torch's ``print(..., file=sys.stderr)``) go there too.

``stitch.debug`` logs at DEBUG, so nothing shows unless asked for:
``logging.basicConfig()`` plus ``logging.getLogger("stitch").setLevel(logging.DEBUG)``.
With ``Settings.dump_dir`` (``STITCH_DEBUG=dir``) every message is also appended to
``dir/messages.log``.

The model's own prints, logs and warnings are not touched here: stitch's runs of the model
keep them to replay and compare (``isolation.silenced_output``, the epilogue's recording)
and those hold inside ``quiet()``. Other threads keep their stderr, warnings and torch's
log handlers as they were.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterator

DEBUG_LOGGER = "stitch.debug"
MESSAGES_FILE = "messages.log"

Sink = Callable[[str, str], None]  # (source, text)


@contextlib.contextmanager
def quiet(dump_dir: str | None = None) -> Iterator[None]:
    """Route torch's logs, warnings and stderr writes of this thread to ``stitch.debug``."""
    sink = _sink(dump_dir)
    thread = threading.get_ident()
    stream = _StderrToLog(sink, sys.stderr, thread)
    with _torch_logs_to(sink, thread), _warnings_to(sink, thread), \
            contextlib.redirect_stderr(stream):
        try:
            yield
        finally:
            stream.flush()


def _sink(dump_dir: str | None) -> Sink:
    logger = logging.getLogger(DEBUG_LOGGER)
    path = os.path.join(dump_dir, MESSAGES_FILE) if dump_dir else None

    def send(source: str, text: str) -> None:
        text = text.rstrip()
        if not text.strip():
            return
        if path is not None:
            os.makedirs(dump_dir, exist_ok=True)
            with open(path, "a") as f:
                f.write(f"[{source}] {text}\n")
        if logger.isEnabledFor(logging.DEBUG):
            record = logger.makeRecord(logger.name, logging.DEBUG, __file__, 0, "[%s] %s",
                                       (source, text), None)
            # straight to the handlers: stitch's runs of the model patch Logger.handle to
            # keep the model's records for comparison, and this one is not the model's
            logger.callHandlers(record)

    return send


class _StderrToLog(io.TextIOBase):
    """``sys.stderr`` for the exporting thread: each completed write goes to the sink;
    other threads write to the stream it replaced."""

    def __init__(self, sink: Sink, stream, thread: int):
        self._sink, self._stream, self._thread = sink, stream, thread
        self._pending = ""

    def write(self, text: str) -> int:
        if threading.get_ident() != self._thread:
            return self._stream.write(text)
        self._pending += text
        if self._pending.endswith("\n"):  # print writes its text, then its end
            self.flush()
        return len(text)

    def flush(self) -> None:
        if threading.get_ident() != self._thread:
            self._stream.flush()
        elif self._pending:
            text, self._pending = self._pending, ""
            self._sink("stderr", text)

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:  # a child process handed sys.stderr writes to the real one
        return self._stream.fileno()

    @property
    def encoding(self) -> str:
        return getattr(self._stream, "encoding", None) or "utf-8"


class _ToSink(logging.Handler):
    """Stands in for one torch logger's handlers: this thread's records go to the sink,
    other threads' to the handlers it replaced."""

    def __init__(self, sink: Sink, thread: int, replaced: list[logging.Handler]):
        super().__init__()
        self._sink, self._thread, self._replaced = sink, thread, replaced

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread != self._thread:
            for handler in self._replaced:
                if record.levelno >= handler.level:
                    handler.handle(record)
            return
        try:
            self._sink(record.name, f"{record.levelname}: {record.getMessage()}")
        except Exception:  # noqa: BLE001 - logging's own convention for a failed emit
            self.handleError(record)


@contextlib.contextmanager
def _torch_logs_to(sink: Sink, thread: int) -> Iterator[None]:
    """Each torch logger's console handlers (torch's own follows ``sys.stderr``) are stood in
    for by one ``_ToSink``; other handlers (TORCH_TRACE's file), levels and propagation are
    left alone, so what torch would have shown is routed and nothing more."""
    saved = []
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if not (name == "torch" or name.startswith("torch.")) or \
                not isinstance(logger, logging.Logger):
            continue
        console = [h for h in logger.handlers if _console(h)]
        if console:
            saved.append((logger, logger.handlers))
            logger.handlers = [h for h in logger.handlers if not _console(h)] + [
                _ToSink(sink, thread, console)]
    try:
        yield
    finally:
        for logger, handlers in saved:
            logger.handlers = handlers


def _console(handler: logging.Handler) -> bool:
    if isinstance(handler, logging.FileHandler):
        return False
    stream = getattr(handler, "stream", None)
    return stream is not None and any(
        stream is s for s in (sys.stderr, sys.__stderr__, sys.stdout, sys.__stdout__))


@contextlib.contextmanager
def _warnings_to(sink: Sink, thread: int) -> Iterator[None]:
    """A warning that would be shown goes to the sink instead; filters are the user's, and
    ``catch_warnings`` inside (the runs that keep the model's warnings) still record."""
    with warnings.catch_warnings():
        shown = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None):
            if threading.get_ident() != thread:
                return shown(message, category, filename, lineno, file, line)
            sink("warning", warnings.formatwarning(message, category, filename, lineno, line))

        warnings.showwarning = show
        yield
