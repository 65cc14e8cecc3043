"""Request ids on every log record a request causes (the epilogue's included)."""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Iterator
from contextlib import contextmanager

REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("stitch_request_id",
                                                                  default="-")
EPILOGUE_LOGGER = "stitch.serve.epilogue"  # where the epilogue's prints go in a server
FORMAT = "%(asctime)s %(levelname)s %(name)s [request %(request_id)s] %(message)s"
_installed = False


def tag_records() -> None:
    """Every log record gets ``request_id`` (``-`` outside a request). Idempotent."""
    global _installed
    if not _installed:
        previous = logging.getLogRecordFactory()

        def factory(*args, **kwargs):
            record = previous(*args, **kwargs)
            record.request_id = REQUEST_ID.get()
            return record

        logging.setLogRecordFactory(factory)
        _installed = True


def install(level: int | str = logging.INFO) -> None:
    """A server's logging: records tagged with the request id, root at ``level``."""
    tag_records()
    logging.basicConfig(level=level, format=FORMAT, force=True)
    logging.captureWarnings(True)  # warnings.warn from the epilogue -> py.warnings logger


@contextmanager
def request(request_id: str) -> Iterator[None]:
    token = REQUEST_ID.set(request_id)
    try:
        yield
    finally:
        REQUEST_ID.reset(token)


def log_print(text: str, stream: str) -> None:
    """The epilogue's ``print`` in a server: one log record per printed line."""
    logger = logging.getLogger(EPILOGUE_LOGGER)
    for line in text.rstrip("\n").split("\n"):
        logger.info("%s%s", "" if stream == "stdout" else "[stderr] ", line)
