"""The error hierarchy shared by every stage.

It lives in ``capture`` (the first stage) so that both ``capture`` and ``stitch`` can raise
it without ``capture`` importing ``stitch``. Every message says what was found, where, what
was expected and what the user can do.
"""

from __future__ import annotations

from collections.abc import Iterator

from .torch_messages import HIGHER_ORDER_OP_LINE, matches


class StitchError(Exception):
    """Base class of every error stitch raises on purpose."""


class InputError(StitchError, TypeError):
    """The model or its example inputs are not of a form stitch can work with."""


class SourceUnavailableError(StitchError):
    """A function that must be read or rewritten has no Python source."""


class CaptureError(StitchError):
    """Capturing the model's graph breaks failed for a reason that is not the model's own."""


def describe(value: object) -> str:
    """A short, safe description of a value for error messages."""
    name = type(value).__name__
    shape = getattr(value, "shape", None)
    if shape is not None:
        return f"{name} of shape {tuple(shape)}"
    text = repr(value)
    return f"{name} {text[:60]}{'...' if len(text) > 60 else ''}"


def gist(error: BaseException, limit: int = 300) -> str:
    """``Class: first line`` of an error, for a one-line message. Where the first line only
    announces what follows (it ends with ``:``, as torch's "Got graph break/error:" does),
    the next two non-empty lines (what broke, its explanation; not the operator's name) are
    joined to it."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    text = lines[0] if lines else ""
    if text.endswith(":") and len(lines) > 1:
        more = [line for line in lines[1:4] if not matches(HIGHER_ORDER_OP_LINE, line)]
        text = " ".join([text, *more[:2]])
    if len(text) > limit:
        text = text[:limit] + "..."
    return f"{type(error).__name__}: {text}"


def error_chain(error: BaseException | None) -> Iterator[BaseException]:
    """``error``, then the error it was raised from (or while handling), and so on, each
    once."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__
