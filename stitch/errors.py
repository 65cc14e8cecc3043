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
    """torch.export refused the rewritten model. ``where``: the user's ``file:line`` it was
    tracing, where known."""

    def __init__(self, message: str, where: str | None = None) -> None:
        super().__init__(message)
        self.where = where


class VerificationError(StitchError):
    """The stitched program computed something different from the model. ``raised``: the
    program's error, where the model returned normally and the program raised; ``size_test``:
    a forced side's size test, where that run is no evidence either way (its sizes say the
    side is not taken)."""

    def __init__(self, message: str, raised: BaseException | None = None,
                 size_test: str = "") -> None:
        super().__init__(message)
        self.raised = raised
        self.size_test = size_test


class SpecializationError(StitchError, RuntimeError):
    """An input took a branch the program was specialised away from (a guarded site)."""


def check_failure(type_name: str, message: str) -> BaseException:
    """The exception a failed check raises: the type the model raised — a builtin by name
    (an assert: AssertionError), the model's own class by ``module.qualname`` —, or
    SpecializationError for a guard; None when the name is unknown here."""
    if type_name == "SpecializationError":
        return SpecializationError(message)
    exc_type = exception_type(type_name)
    if exc_type is not None:
        return exc_type(message) if message else exc_type()
    return None


def exception_type(type_name: str) -> type | None:
    """The exception class ``type_name`` names: a builtin, or ``module.Qual.Name``."""
    import builtins
    import importlib
    import sys

    parts = type_name.split(".")
    found = getattr(builtins, type_name, None) if len(parts) == 1 else None
    for i in range(len(parts) - 1, 0, -1):  # the longest importable module prefix
        module_name = ".".join(parts[:i])
        module = sys.modules.get(module_name)
        if module is None:
            try:
                module = importlib.import_module(module_name)
            except (ImportError, ValueError):
                continue
        found = module
        for part in parts[i:]:
            found = getattr(found, part, None)
        break
    return found if isinstance(found, type) and issubclass(found, BaseException) else None


class UnsupportedSideEffectError(StitchError):
    """A side effect stitch cannot defer to the epilogue (a file write, a global mutation)."""


class ServeError(StitchError):
    """The artifact cannot be served as asked, or the serving environment is broken."""


class RequestError(ServeError, ValueError):
    """A request does not fit the served model (input name, dtype, shape or batch size)."""
