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
as a read (``rt_values.as_number``; results made here are marked too) or a plain or
symbolic Python number. Anything else (a tensor the model had as a tensor, a string, a
list) takes the operator as written. A division by zero or a negative shift count raises
the exception Python raises, with its message, from a check in the graph (``rt_checks``).
A float power past the largest double raises ``OverflowError`` (a tensor's is inf). An int
power with a negative exponent, whose Python result is a float where the program's is an
int, a negative float base with a fractional exponent (Python: a complex), and an int result
past int64 (``+``, ``-``, ``*``, ``//``, ``**``, ``<<``, unary ``-``, ``abs``: Python's int
grows), and an int divided by an int that is not a double exactly (past 2**53: Python
divides the ints exactly, the program their doubles) have no value of the traced kind:
the program raises ``SpecializationError`` naming the operation, never a wrong number. In a torch.where's arm the checks hold only where the
arm is taken (``when``, ``arm_checks.py``). Bitwise ``& | ^`` of two bools is a bool, of
ints an int, and of a float the ``TypeError`` Python raises; a comparison of numbers is a
bool, marked as one.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch

from ...epilogue.entries import NUMBER_KIND
from .python_errors import OPERATOR_ERRORS, POWER_OVERFLOW
from .rt_checks import encode_message, run_check
from .rt_int64 import SITE, exact_doubles, int64_check, not_lowest, specialised
from .rt_int64 import int_tensor as _tensor
from .rt_values import SEQUENCES, as_number, numbers_read

OPS: dict[str, Callable] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow,
    "<<": operator.lshift, ">>": operator.rshift,
    "&": operator.and_, "|": operator.or_, "^": operator.xor,
}
COMPARE: dict[str, Callable] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "==": operator.eq, "!=": operator.ne,
}
IN_PLACE: dict[str, Callable] = {
    "+": operator.iadd, "-": operator.isub, "*": operator.imul, "/": operator.itruediv,
    "//": operator.ifloordiv, "%": operator.imod, "**": operator.ipow,
    "<<": operator.ilshift, ">>": operator.irshift,
    "&": operator.iand, "|": operator.ior, "^": operator.ixor,
}
BITWISE = frozenset({"&", "|", "^"})
_SAMPLE = {"bool": (True, False), "int": (1, 0), "float": (1.0, 0.0)}


def number_op(symbol: str, a: Any, b: Any, numbers: bool = False, when: Any = None) -> Any:
    """``a <symbol> b`` as Python computes it on numbers, where both were numbers
    (``numbers``: both are, by the source; a 0-d tensor is then the number of its dtype's
    kind, where it carries no mark). ``when``: the arm of a torch.where this runs in is
    taken only where it holds (``arm_checks.py``); elsewhere the operands are 1s."""
    kinds = _kinds(a, b, numbers)
    if kinds is None:
        return _over_tensor(symbol, a, b, numbers)
    return _python(symbol, calm(when, a), calm(when, b), kinds, numbers)


def _over_tensor(symbol: str, a: Any, b: Any, numbers: bool) -> Any:
    """``a <symbol> b`` where one is no number. A number read (a 0-d tensor here) over a
    tensor divides as the model's Python number did: ``Tensor.__rtruediv__``, the
    tensor's reciprocal times the number (two roundings; a true division is one, and
    differs in the last bit)."""
    if symbol == "/" and isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) \
            and number_kind(a, numbers) is not None and number_kind(b, numbers) is None:
        return b.reciprocal() * a
    if symbol == "+" and type(a) in SEQUENCES and type(b) in SEQUENCES \
            and not torch.compiler.is_dynamo_compiling():
        # ``x.size()[:d] + (n,)``: a shape, whose numbers are Python's (a read there is its
        # number: a symbolic size while torch.export traces; Dynamo's census shows the op
        # the size reaches as data-dependent, which torch.export is left to decide)
        return OPS[symbol](numbers_read(a), numbers_read(b))
    if symbol == "+" and torch.Size in (type(a), type(b)) and type(a) in SEQUENCES \
            and type(b) in SEQUENCES and any(isinstance(v, torch.Tensor) for v in (*a, *b)):
        # Dynamo's census: a shape holding a read is no torch.Size (Dynamo fails making
        # one); as a tuple, the op it sizes breaks the graph there, as a data-dependent one
        return tuple(a) + tuple(b)
    return OPS[symbol](a, b)


def number_iop(symbol: str, a: Any, b: Any, numbers: bool = False, when: Any = None) -> Any:
    """``a <symbol>= b``: on numbers a new number (a read's tensor is never written in
    place: it may be a view of the tensor read); anything else in place, as written."""
    kinds = _kinds(a, b, numbers)
    if kinds is None and symbol == "/" and isinstance(b, torch.Tensor) \
            and number_kind(a, numbers) is not None and number_kind(b, numbers) is None:
        return _over_tensor(symbol, a, b, numbers)  # ``v /= t``: v becomes a tensor
    if kinds is None:
        return IN_PLACE[symbol](a, b)
    return _python(symbol, calm(when, a), calm(when, b), kinds, numbers)


def number_unary(symbol: str, a: Any, numbers: bool = False, when: Any = None) -> Any:
    """``-a``, ``+a``, ``~a`` of a read: a bool is the int 0 or 1 (``-True`` is -1,
    ``~True`` is -2; on a bool tensor ``-`` raises and ``~`` is a logical not). ``-`` of
    int64's minimum, whose Python int is 2**63, raises ``SpecializationError``."""
    kind = number_kind(a, numbers)
    if not isinstance(a, torch.Tensor) or kind is None:
        return {"-": operator.neg, "+": operator.pos, "~": operator.invert}[symbol](a)
    a = calm(when, a)
    if kind == "bool":
        a = a.long()
        kind = "int"
    if symbol == "~" and kind == "float":
        return ~a  # raises as Python does (a float has no ``~``)
    if symbol == "-" and kind == "int":
        not_lowest(a, "-")
    result = {"-": operator.neg, "+": operator.pos, "~": operator.invert}[symbol](a)
    return as_number(result)


def calm(when: Any, value: Any) -> Any:
    """``value`` where ``when`` holds, else a 1 of its kind (also inside a list or tuple).
    Both arms of a torch.where run on every input, and the arm not taken must not raise:
    on 1s no operator or number function does (``1 // 1``, ``1 << 1``, ``log(1)``), and
    that arm's values are thrown away by the select."""
    if not isinstance(when, torch.Tensor):
        return value
    if isinstance(value, list | tuple):
        return type(value)(calm(when, v) for v in value)
    if not isinstance(value, torch.Tensor) or value.dim() != 0:
        return value
    if when.device != value.device:
        when = when.to(value.device)
    out = torch.where(when, value, torch.ones_like(value))
    kind = getattr(value, NUMBER_KIND, None)
    if kind is not None:  # a fresh tensor: marking it is no side effect under Dynamo
        setattr(out, NUMBER_KIND, kind)
    return out


def number_compare(symbol: str, a: Any, b: Any, numbers: bool = False) -> Any:
    """``a <symbol> b`` of numbers: a bool marked as one, so arithmetic on it is Python's
    (``(a > 0) + (b > 0)`` is 2, a bool tensor's ``+`` a logical or). An int and a float
    compare exactly, as Python's do (a tensor compares an int64 with a Python float in
    float32: ``k > 16777216.0`` was False at 16777217)."""
    kinds = _kinds(a, b, numbers)
    if kinds is None:
        return COMPARE[symbol](a, b)
    kinds = tuple("int" if k == "bool" else k for k in kinds)
    if kinds == ("int", "float"):
        return as_number(_int_float(symbol, a, b))
    if kinds == ("float", "int"):
        return as_number(_int_float(_MIRRORED[symbol], b, a))
    return as_number(COMPARE[symbol](_double(a) if "float" in kinds else a,
                                      _double(b) if "float" in kinds else b))


_MIRRORED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


def _int_float(symbol: str, i: Any, f: Any) -> torch.Tensor:
    """``i <symbol> f`` of an int and a float, exactly: within int64's range against the
    float's floor or ceiling (``i < f`` is ``i < ceil(f)``), outside it by the float's sign
    (NaN: only ``!=`` holds)."""
    device = next(v.device for v in (i, f) if isinstance(v, torch.Tensor))
    ti, tf = _tensor(_as_int(i)).long().to(device), _tensor(f).double().to(device)
    inside = (tf >= -(2.0 ** 63)) & (tf < 2.0 ** 63)
    safe = torch.where(inside, tf, torch.zeros_like(tf))
    if symbol in ("<", ">="):
        high = torch.ceil(safe).long()
        exact, outside = (ti < high, tf > 0) if symbol == "<" else (ti >= high, tf < 0)
    elif symbol in ("<=", ">"):
        low = torch.floor(safe).long()  # an infinite or out-of-range float: its sign decides
        exact, outside = (ti <= low, tf > 0) if symbol == "<=" else (ti > low, tf < 0)
    else:
        exact = (torch.floor(safe) == safe) & (ti == safe.long())
        exact, outside = (exact, torch.zeros_like(inside)) if symbol == "==" else \
            (~exact, torch.ones_like(inside))
    return torch.where(inside, exact, outside)


def number_kind(value: Any, number: bool = False) -> str | None:
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
    ka, kb = number_kind(a, numbers), number_kind(b, numbers)
    return None if ka is None or kb is None else (ka, kb)


def _python(symbol: str, a: Any, b: Any, kinds: tuple[str, str],
            numbers: bool = False) -> torch.Tensor:
    if symbol in BITWISE:
        return _bitwise(symbol, a, b, kinds)
    # Python's bool arithmetic is int arithmetic (``True + True`` is 2)
    kinds = tuple("int" if k == "bool" else k for k in kinds)
    a, b = _as_int(a), _as_int(b)
    left_constant = type(a) in (int, float)
    left = a
    if not isinstance(a, torch.Tensor) and (type(a) is not int or -2 ** 63 <= a < 2 ** 63):
        a = _tensor(a)  # a tensor's reflected ``/`` multiplies by a reciprocal (10 / 3 is
        # one ulp off): a number on the left is a tensor first
    floats = "float" in kinds or symbol == "/"
    if symbol == "/" and "float" not in kinds:
        exact_doubles(left, b)
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
    result = OPS[symbol](a, b)
    if symbol == "%" and floats:  # a zero remainder takes the divisor's sign in Python
        result = torch.where(result == 0, torch.copysign(torch.zeros_like(result),
                                                         _tensor(b).double()), result)
    if symbol == "**" and floats and not (constant and b in (0, 1)):
        _finite_power(a, b, result)
    elif not floats:
        int64_check(symbol, left if left_constant else a, b, result)
    return as_number(result)


def _bitwise(symbol: str, a: Any, b: Any, kinds: tuple[str, str]) -> torch.Tensor:
    """``&``, ``|``, ``^``: of two bools a bool, of ints (a bool is 0 or 1) an int, and of
    a float Python's ``TypeError`` (raised here, at trace time, by Python itself)."""
    if "float" in kinds:
        OPS[symbol](*(_SAMPLE[k][0] for k in kinds))
    if kinds != ("bool", "bool"):
        a, b = _as_int(a), _as_int(b)
    return as_number(OPS[symbol](a, b))


def _as_int(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.dtype == torch.bool:
        return value.long()
    return value


def _double(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.dtype != torch.float64:
        return value.double()
    return value


def _raises_as_python(symbol: str, kinds: tuple[str, str], ok: torch.Tensor,
                      sample: tuple | None = None) -> None:
    """Where ``ok`` is false, raise what Python raises for these operand kinds (the
    exception and its message, from Python itself on sample numbers)."""
    left, right = sample or (_SAMPLE[kinds[0]][0], _SAMPLE[kinds[1]][1])
    name, text = OPERATOR_ERRORS[(symbol, repr(left), repr(right))]
    run_check(SITE, ok, name, encode_message(text))


def _finite_power(a: Any, b: Any, result: torch.Tensor) -> None:
    """A float power is inf past the largest double; Python raises ``OverflowError`` there
    (an infinite operand gives inf in both)."""
    ok = torch.isfinite(result) | ~(torch.isfinite(_tensor(a)) & torch.isfinite(_tensor(b)))
    run_check(SITE, ok, POWER_OVERFLOW[0], encode_message(POWER_OVERFLOW[1]))


def _power_checks(a: Any, b: Any, kinds: tuple[str, str], constant: bool) -> None:
    ta, tb = _tensor(a), _tensor(b)
    if "float" in kinds:
        if not (constant and b >= 0):
            _raises_as_python("**", kinds, (ta != 0) | (tb >= 0), sample=(0.0, -1.0))
        fractional = tb != torch.floor(tb)
        specialised("**", (ta >= 0) | ~fractional,
                     "a negative float to a fractional power is a complex number in Python; "
                     "this program computes real numbers")
        return
    _raises_as_python("**", kinds, (ta != 0) | (tb >= 0), sample=(0, -1))
    specialised("**", tb >= 0, "an int to a negative int power is a float in Python; this "
                          "program computes ints there (its examples' powers were ints)")
