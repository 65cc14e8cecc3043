"""Checks in rewritten code: data-dependent asserts and raises, and guards (a branch
specialised to one side), checked in the graph or by the epilogue (``Settings.checks``)."""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import re
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import unquote

import torch
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

from ...epilogue.stand_ins import current_recorder
from ...errors import SpecializationError, UnsupportedSideEffectError, check_failure, exception_type
from .rt_predicate import pred, size_pred
from .rt_state import RT, is_tracing
from .rt_symbolic import is_size, is_unbacked, number_kind

CHECK_PREFIX = "[stitch:"
# Characters an in-graph check message keeps as they are. Everything else (quotes,
# backslashes, newlines, ``?``, ``%``, brackets, non-ASCII) is percent-encoded: Inductor's
# C++ backend pastes the message into a string literal without escaping it, so one quote or
# newline in a model's assert message (or a guard's reason) made the kernel fail to compile.
_MESSAGE_SAFE = " !#$&'()*+,-./:;<=>@^_`{|}~"
_CHECK = re.compile(r"\[stitch:([^:\]]+):([A-Za-z_][\w.]*):([^\]]*)\]")
# CUDA refuses an ``_assert_async`` message of 255 bytes or more, on every call, passing or
# not ("Message length must be smaller than 255"). A longer check text carries a reference,
# ``%@`` and a digest (never in an encoded message: its ``%`` is always followed by two hex
# digits); the message itself is in LONG_MESSAGES while this process runs, and in the
# program's epilogue (``Epilogue.messages``), which artifacts carry.
LONGEST = 254
LONG_MESSAGES: dict[str, str] = {}
_REFERENCE = "%@"


def encode_message(message: str) -> str:
    """A check's message as rewritten code carries it (``parse_check`` decodes it from the
    error a failed check raises): ``urllib.parse.quote``'s encoding, written in plain Python
    so Dynamo traces it (a computed message inside a cond's arm)."""
    out = []
    for c in message:
        if c in _MESSAGE_SAFE or "0" <= c <= "9" or "a" <= c <= "z" or "A" <= c <= "Z":
            out.append(c)
        else:
            out.extend("%" + format(b, "02X") for b in c.encode("utf-8"))
    return "".join(out)


def message(text: Callable[[], Any], values: Callable[[], tuple], source: str) -> str:
    """A check's computed message, encoded: made from the values it reads when the check
    is traced (static: strings, attributes, shapes). One that formats a value known only
    at run time — a tensor (Longformer's count of global tokens), a size from data — is the
    message's source text (``source``): the exception is the model's, its text names the
    expression instead of the values (a graph's check carries one fixed message)."""
    if torch.compiler.is_dynamo_compiling() or is_tracing():
        if any(isinstance(v, torch.Tensor) or _symbolic(v) for v in values()):
            return encode_message(source)
    return encode_message(str(text()))


def _symbolic(value: Any) -> bool:
    if isinstance(value, tuple | list):  # torch.Size too
        return any(isinstance(v, torch.Tensor) or _symbolic(v) for v in value)
    # number_kind, not isinstance: under Dynamo a SymInt is an ``int`` to isinstance
    return isinstance(value, bool | int | float | torch.SymInt | torch.SymFloat
                      | torch.SymBool) and number_kind(value) != "constant"


def parse_check(text: str, messages: dict[str, str] | None = None
                ) -> tuple[str, str, str] | None:
    """``(site, type name, message)`` from an error raised by an in-graph check, or None.
    Backends add their own text around the message; the brackets delimit it. A reference
    to a long message is looked up in ``messages`` (the program's), then in this process's."""
    match = _CHECK.search(text)
    if match is None:
        return None
    site, type_name, message = match.groups()
    if message.startswith(_REFERENCE):
        key = message[len(_REFERENCE):]
        message = (messages or {}).get(key) or LONG_MESSAGES.get(key) or encode_message(
            f"(a check's message of more than {LONGEST} bytes, not kept with this program)")
    return site, type_name, unquote(message)


@torch._dynamo.assume_constant_result  # run as Python while Dynamo traces: its text a constant
def check_text(site: str, type_name: str, encoded: str) -> str:
    """The text an in-graph check carries: ``[stitch:SITE:TYPE:MESSAGE]``, or a reference
    in place of MESSAGE where the whole would be longer than CUDA takes."""
    text = f"{CHECK_PREFIX}{site}:{type_name}:{encoded}]"
    if len(text.encode()) <= LONGEST:
        return text
    key = hashlib.sha256(encoded.encode()).hexdigest()[:20]
    LONG_MESSAGES[key] = encoded
    return f"{CHECK_PREFIX}{site}:{type_name}:{_REFERENCE}{key}]"


def referenced_messages(texts) -> tuple[tuple[str, str], ...]:
    """(key, encoded message) of each long message the check texts ``texts`` refer to."""
    found = {}
    for text in texts:
        for match in _CHECK.finditer(text):
            message = match.group(3)
            key = message[len(_REFERENCE):]
            if message.startswith(_REFERENCE) and key in LONG_MESSAGES:
                found[key] = LONG_MESSAGES[key]
    return tuple(sorted(found.items()))


def check(site: str, ok: Any, encoded: str, exc_type: type = AssertionError) -> None:
    """A data-dependent assert/raise. Eager: raises as the model did. Traced: the condition
    goes to the epilogue (``Settings.checks``) or stays in the graph as
    ``torch._assert_async``, whose failure text is ``[stitch:SITE:TYPE:MESSAGE]`` (message
    from ``encode_message``)."""
    if not isinstance(ok, torch.Tensor) and number_kind(ok) == "symbolic":
        # a test on a dynamic size (``if any(s % 4 for s in x.shape): raise``): checked on
        # the size's truth as a tensor, where the model raises, not by a guard on the input
        ok = size_pred(ok)
    if not isinstance(ok, torch.Tensor):
        if not ok:
            raise exc_type(unquote(encoded)) if encoded else exc_type()
        return
    if torch.compiler.is_dynamo_compiling():
        # inside a cond/while body: Dynamo's `list(t.size()) == [.., <0-d tensor>, ..]` is a
        # tensor whose dtype it cannot read (Longformer's asserts); as_tensor makes it one
        ok = torch.as_tensor(ok, dtype=torch.bool)
    elif is_tracing():
        _findable(exc_type)
    run_check(site, pred(ok), type_name(exc_type), encoded)


def _findable(exc_type: type) -> None:
    """The program raises the model's exception class, found by name when the check fails:
    one defined inside a function has no name to be found by."""
    if exception_type(type_name(exc_type)) is not exc_type:
        raise UnsupportedSideEffectError(
            f"a data-dependent check raises {exc_type.__qualname__}, which the program "
            "cannot find by name when the check fails (a class defined inside a function). "
            "Define the exception class at module level.")


def type_name(exc_type: type) -> str:
    """How a check names the exception it raises: a builtin by its name, any other class
    by ``module.qualname`` (the program raises the model's own class)."""
    module = exc_type.__module__
    return exc_type.__name__ if module == "builtins" else f"{module}.{exc_type.__qualname__}"


def run_check(site: str, ok: torch.Tensor, type_name: str, encoded: str) -> None:
    if not torch.compiler.is_dynamo_compiling() and not is_tracing():
        if not bool(ok):  # eager: on the host, like the model (no device-side assert)
            raise check_failure(type_name, unquote(encoded))
        return
    recorder = _check_recorder(ok)
    if recorder is not None:
        recorder.defer_check(site, ok, type_name, unquote(encoded), _user_location())
        return
    torch._assert_async(ok, check_text(site, type_name, encoded))


def _check_recorder(ok: torch.Tensor):
    """The recorder of the export in progress when this check goes to its epilogue."""
    if torch.compiler.is_dynamo_compiling() or RT.bodies or RT.checks == "graph":
        return None
    if RT.checks == "auto" and ok.device.type == "cpu":
        return None
    return current_recorder()


def _user_location() -> str:
    """file:line of the rewritten code that called into this module."""
    import sys

    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
    return f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame else ""


GUARD_ERROR = "SpecializationError"
# while an export traces: guard site -> whether each evaluation met a Python bool (True) or
# data, a size or anything else (False)
_GUARDS_MET: contextvars.ContextVar[dict[str, set[bool]] | None] = contextvars.ContextVar(
    "guards_met", default=None)


@contextlib.contextmanager
def guards_met() -> Iterator[dict[str, set[bool]]]:
    """The guard sites evaluated inside, each with whether its predicate was a Python bool
    (a test of Python values: ``if batch is None``) on every evaluation. Such a guard is
    no specialisation on data: torch.export decides a test of Python values alike."""
    met: dict[str, set[bool]] = {}
    token = _GUARDS_MET.set(met)
    try:
        yield met
    finally:
        _GUARDS_MET.reset(token)


def guard(site: str, predicate: Any, side: bool, encoded: str) -> None:
    """The model was specialised to one side of ``if predicate``: refuse the other side."""
    met = _GUARDS_MET.get()
    if met is not None:
        met.setdefault(site, set()).add(type(predicate) is bool)
    if isinstance(predicate, torch.Tensor) or (torch.compiler.is_dynamo_compiling()
                                               and is_unbacked(predicate)):
        _guard_in_graph(site, predicate, side, encoded)
        return
    try:
        truth = bool(predicate)
    except GuardOnDataDependentSymNode:  # a size from data, no hint to decide it by
        _guard_in_graph(site, predicate, side, encoded)
        return
    if truth != side:
        raise SpecializationError(unquote(encoded))


def _guard_in_graph(site: str, predicate: Any, side: bool, encoded: str) -> None:
    """The guard as a check in the graph; a symbolic predicate (a size from data) is also
    told to the tracer (``torch._check``), so what follows traces on the kept side."""
    ok = pred(predicate) if side else torch.logical_not(pred(predicate))
    run_check(site, ok, GUARD_ERROR, encoded)
    if not isinstance(predicate, torch.Tensor) and is_size(predicate):
        # a size: shape ops after the guard need the fact (torch adds its own runtime
        # assertion too); a flag read from data (``.item()``) needs none, and its own
        # assertion would fire before the guard's message
        torch._check(predicate if side else torch.sym_not(predicate))


def guarded_value(site: str, predicate: Any, side: bool, encoded: str,
                  value: Callable[[], Any]) -> Any:
    guard(site, predicate, side, encoded)
    return value()
