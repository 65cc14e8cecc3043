"""stitch's errors: what was found, where, what was expected, and what to do."""

from __future__ import annotations

from capture.errors import CaptureError, InputError, SourceUnavailableError, StitchError, describe

__all__ = ["CaptureError", "ExportFailedError", "GuardsRefusedError", "InputError", "SourceUnavailableError",
           "RequestError", "ServeError", "SpecializationError", "StitchError", "UnfixableBreaksError", "UnsupportedSideEffectError",
           "VerificationError", "describe"]


class UnfixableBreaksError(StitchError):
    """Graph breaks remain that stitch could not rewrite; ``sites`` lists every one."""

    def __init__(self, message: str, sites=(), decisions=()) -> None:
        super().__init__(message)
        self.sites = tuple(sites)
        self.decisions = tuple(decisions)


class GuardsRefusedError(UnfixableBreaksError):
    """Branches stitch could only specialise (guard); refused because guards were not asked
    for (``Settings(allow_guards=True)``). ``decisions`` holds the guard decisions."""


class ExportFailedError(StitchError):
    """torch.export refused the rewritten model."""


class VerificationError(StitchError):
    """The stitched program computed something different from the model."""


class SpecializationError(StitchError, RuntimeError):
    """An input took a branch the program was specialised away from (a guarded site)."""


def check_failure(type_name: str, message: str) -> BaseException:
    """The exception a failed check raises: the builtin type the model raised (an assert:
    AssertionError), or SpecializationError for a guard; None when the name is unknown."""
    if type_name == "SpecializationError":
        return SpecializationError(message)
    import builtins

    exc_type = getattr(builtins, type_name.rsplit(".", 1)[-1], None)
    if isinstance(exc_type, type) and issubclass(exc_type, BaseException):
        return exc_type(message) if message else exc_type()
    return None


class UnsupportedSideEffectError(StitchError):
    """A side effect stitch cannot defer to the epilogue (a file write, a global mutation)."""


class ServeError(StitchError):
    """The artifact cannot be served as asked, or the serving environment is broken."""


class RequestError(ServeError, ValueError):
    """A request does not fit the served model (input name, dtype, shape or batch size)."""
