"""Arithmetic on scalar reads as Python does it on numbers.

A read kept as a 0-d tensor (``k = n.item()`` -> ``scalar(n)``) was a Python number in the
model, and tensor operators differ from number operators exactly where a program would be
silently wrong: ``1 / k`` at 0 is inf (Python raises ``ZeroDivisionError``), ``1 << k``
with a negative ``k`` is 0 (``ValueError``), ``True + True`` is a logical or (2), an int
divided by an int is float32 (a double), ``2 ** k`` with a negative ``k`` is 0 (0.5).
``number_ops.py`` routes each operator whose operand comes from a read here:

    k // m   ->  __stitch_rt__.number_op("//", k, m)
    k += 1   ->  k = __stitch_rt__.number_iop("+", k, 1)

Python's rules apply only where every operand was a number in the model: a tensor marked
as a read (``rt_values._as_number``; results made here are marked too) or a plain or
symbolic Python number. Anything else (a tensor the model had as a tensor, a string, a
list) takes the operator as written. A division by zero or a negative shift count raises
the exception Python raises, with its message, from a check in the graph (``rt_checks``).
An int power with a negative exponent, whose Python result is a float where the program's
is an int, and a negative float base with a fractional exponent (Python: a complex), have
no value of the traced kind: the program raises ``SpecializationError`` naming the
operation, never a wrong number.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch

from ..epilogue.entries import NUMBER_KIND
from .rt_checks import GUARD_ERROR, _checked, encode_message, type_name
from .rt_values import _as_number

OPS: dict[str, Callable] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow,
    "<<": operator.lshift, ">>": operator.rshift,
}
IN_PLACE: dict[str, Callable] = {
    "+": operator.iadd, "-": operator.isub, "*": operator.imul, "/": operator.itruediv,
    "//": operator.ifloordiv, "%": operator.imod, "**": operator.ipow,
    "<<": operator.ilshift, ">>": operator.irshift,
}
_SAMPLE = {"bool": (True, False), "int": (1, 0), "float": (1.0, 0.0)}
SITE = "python-number"


def number_op(symbol: str, a: Any, b: Any, numbers: bool = False) -> Any:
    """``a <symbol> b`` as Python computes it on numbers, where both were numbers
    (``numbers``: both are, by the source; a 0-d tensor is then the number of its dtype's
    kind, where it carries no mark)."""
    kinds = _kinds(a, b, numbers)
    if kinds is None:
        return OPS[symbol](a, b)
    return _python(symbol, a, b, kinds)


def number_iop(symbol: str, a: Any, b: Any, numbers: bool = False) -> Any:
    """``a <symbol>= b``: on numbers a new number (a read's tensor is never written in
    place: it may be a view of the tensor read); anything else in place, as written."""
    kinds = _kinds(a, b, numbers)
    if kinds is None:
        return IN_PLACE[symbol](a, b)
    return _python(symbol, a, b, kinds)


def number_unary(symbol: str, a: Any, numbers: bool = False) -> Any:
    """``-a``, ``+a``, ``~a`` of a read: a bool is the int 0 or 1 (``-True`` is -1,
    ``~True`` is -2; on a bool tensor ``-`` raises and ``~`` is a logical not)."""
    kind = _kind(a, numbers)
    if not isinstance(a, torch.Tensor) or kind is None:
        return {"-": operator.neg, "+": operator.pos, "~": operator.invert}[symbol](a)
    if kind == "bool":
        a = a.long()
        kind = "int"
    if symbol == "~" and kind == "float":
        return ~a  # raises as Python does (a float has no ``~``)
    result = {"-": operator.neg, "+": operator.pos, "~": operator.invert}[symbol](a)
    return _as_number(result)


def _kind(value: Any, number: bool = False) -> str | None:
    if isinstance(value, torch.Tensor):
        if value.dim() != 0:
            return None
        kind = getattr(value, NUMBER_KIND, None)
        if kind is None and number:  # a number by the source, its mark not seen here
            kind = "bool" if value.dtype == torch.bool else \
                "float" if value.is_floating_point() else "int"
        return kind
    if isinstance(value, bool | torch.SymBool):
        return "bool"
    if isinstance(value, int | torch.SymInt):
        return "int"
    if isinstance(value, float | torch.SymFloat):
        return "float"
    return None


def _kinds(a: Any, b: Any, numbers: bool = False) -> tuple[str, str] | None:
    """Both operands' Python kinds, where both were numbers and one is a read's tensor."""
    if not (isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor)):
        return None
    ka, kb = _kind(a, numbers), _kind(b, numbers)
    return None if ka is None or kb is None else (ka, kb)


def _python(symbol: str, a: Any, b: Any, kinds: tuple[str, str]) -> torch.Tensor:
    # Python's bool arithmetic is int arithmetic (``True + True`` is 2)
    kinds = tuple("int" if k == "bool" else k for k in kinds)
    a, b = _as_int(a), _as_int(b)
    floats = "float" in kinds or symbol == "/"
    if floats:  # a Python float is a double; an int divided by an int too
        a, b = _double(a), _double(b)
    # a constant right operand that cannot raise needs no check in the graph
    constant = type(b) in (int, float)
    if symbol in ("/", "//", "%") and not (constant and b != 0):
        _raises_as_python(symbol, kinds, _tensor(b) != 0)
    elif symbol in ("<<", ">>") and not (constant and b >= 0):
        _raises_as_python(symbol, kinds, _tensor(b) >= 0, sample=(1, -1))
    elif symbol == "**" and not (constant and b >= 0 and b == int(b)):
        _power_checks(a, b, kinds, constant)
    return _as_number(OPS[symbol](a, b))


def _as_int(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.dtype == torch.bool:
        return value.long()
    return value


def _double(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.dtype != torch.float64:
        return value.double()
    return value


def _tensor(value: Any) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    dtype = torch.float64 if isinstance(value, float | torch.SymFloat) else torch.int64
    return torch.scalar_tensor(value, dtype=dtype)


def _raises_as_python(symbol: str, kinds: tuple[str, str], ok: torch.Tensor,
                      sample: tuple | None = None) -> None:
    """Where ``ok`` is false, raise what Python raises for these operand kinds (the
    exception and its message, from Python itself on sample numbers)."""
    left, right = sample or (_SAMPLE[kinds[0]][0], _SAMPLE[kinds[1]][1])
    name, text = _ERRORS[(symbol, repr(left), repr(right))]  # 1 == 1.0: keyed by text
    _checked(SITE, ok, name, encode_message(text))


def _errors() -> dict[tuple, tuple[str, str]]:
    """What Python raises for each operator and sample operands (found once, at import:
    no trace runs a ``try``)."""
    samples = [(a, b) for a in (1, 1.0) for b in (0, 0.0)] + [(1, -1), (0, -1), (0.0, -1.0)]
    found = {}
    for symbol in ("/", "//", "%", "<<", ">>", "**"):
        for left, right in samples:
            try:
                OPS[symbol](left, right)
            except Exception as error:  # noqa: BLE001 - what Python raises is the point
                found[(symbol, repr(left), repr(right))] = (type_name(type(error)), str(error))
    return found


_ERRORS = _errors()


def _power_checks(a: Any, b: Any, kinds: tuple[str, str], constant: bool) -> None:
    ta, tb = _tensor(a), _tensor(b)
    if "float" in kinds:
        if not (constant and b >= 0):
            _raises_as_python("**", kinds, (ta != 0) | (tb >= 0), sample=(0.0, -1.0))
        fractional = tb != torch.floor(tb)
        _specialised((ta >= 0) | ~fractional,
                     "a negative float to a fractional power is a complex number in Python; "
                     "this program computes real numbers")
        return
    _raises_as_python("**", kinds, (ta != 0) | (tb >= 0), sample=(0, -1))
    _specialised(tb >= 0, "an int to a negative int power is a float in Python; this "
                          "program computes ints there (its examples' powers were ints)")


def _specialised(ok: torch.Tensor, why: str) -> None:
    _checked(SITE, ok, GUARD_ERROR, encode_message(f"`**` of scalar reads: {why}"))
