"""Text built from traced values, formatted in the epilogue with eager's exact result.

While a model is exported its tensors and scalar reads are symbolic: ``f"{loss:.4f}"``
fails (``unsupported format string passed to SymFloat.__format__``) and ``str(t)`` would
print a FakeTensor. So, while recording, formatting a tensor or a symbolic scalar from user
code returns a marker; the value becomes a graph output; a deferred call's string argument
holding markers becomes a ``template`` argument; the epilogue formats the real values with
the same spec and conversion::

    log.info(f"loss {loss.item():.4f} on {x.shape[0]} rows, sum {s!r}")
    ->  Arg("template", value=["loss ", {"output": 0, "spec": ".4f", "how": "format",
         "scalar": "float"}, " on 4 rows, sum ", {"output": 1, "how": "repr"}])

Covered: f-strings (with format specs and ``!r``/``!s``), ``str.format``, ``format()``,
``str()``/``repr()`` and ``%s``/``%r`` of tensors; ``"%.4f" % x`` written in a print, log or
warning call's arguments (``canonicalize/percent_format.py`` makes it a ``Text`` by
``percent_pieces``). ``%`` elsewhere (text built into a name first) of a symbolic value
needs a Python float at trace time and is not covered (the export fails and says where).
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.utils._pytree

from capture.source import is_user_file

_MARK = "\x00stitch-value-{}\x00"
_MARK_RE = re.compile("\x00stitch-value-(\\d+)\x00")
SCALARS = {"int": int, "float": float, "bool": bool}


def has_marks(text: str) -> bool:
    return "\x00stitch-value-" in text


def without_marks(text: str, replacement: str) -> str:
    """``text`` with each marked value written ``replacement``."""
    return _MARK_RE.sub(replacement, text)


def template(text: str, marks: list[dict]) -> list:
    """Literal pieces and the marked values' formatting records, in order."""
    pieces: list = []
    last = 0
    for match in _MARK_RE.finditer(text):
        if match.start() > last:
            pieces.append(text[last:match.start()])
        pieces.append(dict(marks[int(match.group(1))]))
        last = match.end()
    if last < len(text):
        pieces.append(text[last:])
    return pieces


class Text:
    """An f-string written in a data-dependent branch, kept apart until the epilogue:
    literal pieces and ``(spec, conversion)`` slots, and the values for the slots (a pytree:
    its tensors leave the cond like any logged tensor). ``str()`` gives the f-string's text."""

    def __init__(self, pieces: tuple, values: tuple) -> None:
        self.pieces, self.values = tuple(pieces), tuple(values)

    def __str__(self) -> str:
        out, values = [], iter(self.values)
        for piece in self.pieces:
            out.append(piece if isinstance(piece, str)
                       else _convert(next(values), piece[1], piece[0]))
        return "".join(out)

    def records(self, take: Callable[[Any], tuple[int, str | None]],
                arg: Callable[[Any], dict] | None = None) -> list:
        """The template for the epilogue: traced values become outputs via ``take``; a
        sequence holding sizes (``tuple(h.shape)``) becomes an argument via ``arg`` (its
        numbers outputs, the sequence rebuilt when replayed), formatted as eager would."""
        out, values = [], iter(self.values)
        for piece in self.pieces:
            if isinstance(piece, str):
                out.append(piece)
                continue
            value = next(values)
            if isinstance(value, torch.Tensor | torch.SymInt | torch.SymFloat | torch.SymBool):
                index, scalar = take(value)
                out.append({"output": index, "how": _HOW.get(piece[1], "format"),
                            "spec": piece[0], "scalar": scalar})
            elif arg is not None and holds_sym(value):
                out.append({"arg": arg(value), "how": _HOW.get(piece[1], "format"),
                            "spec": piece[0]})
            else:
                out.append(_convert(value, piece[1], piece[0]))
        return out


_HOW = {"r": "repr", "s": "str", "a": "ascii", "i": "int"}
SEQUENCES = {torch.Size: "Size", tuple: "tuple", list: "list"}


def holds_sym(value: Any) -> bool:
    """A (nested) sequence of plain values holding a size under dynamic shapes."""
    if isinstance(value, torch.SymInt | torch.SymFloat | torch.SymBool):
        return True
    return type(value) in SEQUENCES and any(holds_sym(v) for v in value)


def _convert(value, conversion: str, spec: str) -> str:
    if conversion == "i":  # ``%d`` of a float: its integer part, as printf-style takes it
        return format(int(value), spec)
    if conversion == "r":
        value = repr(value)
    elif conversion == "s":
        value = str(value)
    elif conversion == "a":
        value = ascii(value)
    return format(value, spec)


torch.utils._pytree.register_pytree_node(
    Text, lambda t: (list(t.values), t.pieces),
    lambda values, pieces: Text(pieces, tuple(values)),
    serialized_type_name="stitch.epilogue.formatting.Text")


def render(pieces: list, outputs, value_of: Callable[[dict], Any] | None = None) -> str:
    """The text eager would have made, from the graph's outputs (``value_of``: an argument's
    value, for a sequence of sizes)."""
    out = []
    for piece in pieces:
        if isinstance(piece, str):
            out.append(piece)
            continue
        if "arg" in piece:
            if value_of is None:
                raise ValueError("a template holding a sequence of sizes needs value_of")
            value = value_of(piece["arg"])
        else:
            value = outputs[piece["output"]]
        if piece.get("scalar"):
            value = SCALARS[piece["scalar"]](value.item())
        how = piece["how"]
        out.append(_convert(value, {"repr": "r", "str": "s", "ascii": "a", "int": "i"}.get(how, ""),
                            piece.get("spec", "")))
    return "".join(out)


# printf-style: %[flags][width][.precision]type, no mapping key and no ``*``
_PERCENT = re.compile(r"%([-+ #0]*)(\d*)(?:\.(\d+))?([diouxXeEfFgGsra%])")


def percent_pieces(fmt: str) -> list | None:
    """``fmt``'s printf-style specs (``"loss %.4f at %5d"``) as literal pieces and
    ``(format spec, conversion)`` slots that ``format()`` fills with the same text; None for
    what it does not cover (a mapping key, ``*``, ``%c``, a precision on an integer)."""
    pieces: list = []
    last = 0
    for match in _PERCENT.finditer(fmt):
        if "%" in fmt[last:match.start()]:
            return None  # a spec the pattern does not take
        pieces.append(fmt[last:match.start()])
        flags, width, precision, kind = match.groups()
        last = match.end()
        if kind == "%":
            if flags or width or precision is not None:
                return None
            pieces.append("%")
            continue
        text_like = kind in "sra"
        if (kind in "diuoxX" and precision is not None) or (text_like and precision is not None):
            return None
        align = "<" if "-" in flags else (">" if text_like and width else "")
        sign = "+" if "+" in flags else (" " if " " in flags else "")
        zero = "0" if "0" in flags and "-" not in flags and not text_like else ""
        spec = (align + ("" if text_like else sign + ("#" if "#" in flags else "") + zero)
                + width + (f".{precision}" if precision is not None else "")
                + ("" if text_like else {"i": "d", "u": "d"}.get(kind, kind)))
        conversion = {"s": "s", "r": "r", "a": "a"}.get(kind, "i" if kind in "diu" else "")
        pieces.append((spec, conversion))
    if "%" in fmt[last:]:
        return None
    pieces.append(fmt[last:])
    return [p for p in pieces if p != ""]


@contextlib.contextmanager
def marking_values(take: Callable[[Any], tuple[int, str | None]], active: Callable[[], bool],
                   marks: list[dict]) -> Iterator[None]:
    """While in this context, formatting a tensor or a SymInt/SymFloat/SymBool from user code
    (when ``active()``) returns a marker; ``take(value)`` makes the value a graph output and
    returns ``(output index, scalar kind or None)``; the record goes into ``marks``."""
    patched = []

    def wrap(cls, method: str, how: str):
        original = cls.__dict__.get(method)
        if original is None:
            original = getattr(cls, method)

        def marked(self, *args, **kwargs):
            frame = sys._getframe(1)
            if kwargs or not active() or not is_user_file(frame.f_code.co_filename):
                return original(self, *args, **kwargs)
            index, scalar = take(self)
            marks.append({"output": index, "how": how, "spec": args[0] if args else "",
                          "scalar": scalar})
            return _MARK.format(len(marks) - 1)

        patched.append((cls, method, cls.__dict__.get(method)))
        setattr(cls, method, marked)

    for cls in (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool):
        # a size under dynamic shapes too: "{!r}".format(h.shape[0]) or str(n) would print
        # the symbol ("s77") where eager prints the number
        wrap(cls, "__format__", "format")
        wrap(cls, "__repr__", "repr")
        wrap(cls, "__str__", "str")
    try:
        yield
    finally:
        for cls, method, original in reversed(patched):
            if original is None:
                delattr(cls, method)
            else:
                setattr(cls, method, original)
