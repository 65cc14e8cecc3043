"""Python's int grows where int64 wraps, and Python divides ints exactly where a program
divides their doubles: the checks that make an int operator on scalar reads raise
``SpecializationError`` where its int64 result would differ from Python's (``rt_arith``
calls them). An operand that is a constant bounds the other (``k + 1``: ``k <= 2**63 - 2``,
exact); two operands from data are checked against a double estimate. Inside a torch.where
arm the operands are 1s where the arm is not taken (``rt_arith.calm``), so no check fires
there."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ...errors import SpecializationError
from .rt_checks import GUARD_ERROR, encode_message, run_check
from .rt_values import number_tensor

SITE = "python-number"


def int64_check(symbol: str, a: Any, b: Any, result: torch.Tensor) -> None:
    """Python's int grows where int64 wraps: each int operator whose result can leave
    int64's range is checked, and raises ``SpecializationError`` there. An operand that
    is a constant bounds the other (``k + 1``: ``k <= 2**63 - 2``); two operands from
    data are checked against a double estimate (``_within_int64``). Inside a torch.where
    arm the operands are 1s where the arm is not taken (``calm``), so no check fires
    there."""
    if symbol in ("**", "<<"):
        if not (type(b) is int and b in ((0, 1) if symbol == "**" else (0,))):
            _within_int64(symbol, a, b, result)
        return
    if symbol == "//":  # wraps only for int64's minimum over -1
        if not (type(b) is int and b != -1 or type(a) is int and a != LOWEST):
            in_int64("//", (int_tensor(a) != LOWEST) | (int_tensor(b) != -1))
        return
    if symbol not in _BOUNDS:
        return
    for constant, other, on_left in ((b, a, False), (a, b, True)):
        if type(constant) is int:
            _bounded(symbol, other, *_BOUNDS[symbol](constant, on_left))
            return
    _within_int64(symbol, a, b, result)


LOWEST, HIGHEST = -2 ** 63, 2 ** 63 - 1
_WRAPS = "the int is past int64's range here; Python's int grows, this program computes int64"


def _sum_bounds(c: int, on_left: bool) -> tuple[int, int]:
    return LOWEST - c, HIGHEST - c


def _difference_bounds(c: int, on_left: bool) -> tuple[int, int]:
    # c - k stays in range for c - HIGHEST <= k <= c - LOWEST; k - c for LOWEST + c <= k <=
    # HIGHEST + c
    return (c - HIGHEST, c - LOWEST) if on_left else (LOWEST + c, HIGHEST + c)


def _product_bounds(c: int, on_left: bool) -> tuple[int, int]:
    # ints only (Dynamo traces this): ceil(p / q) is -(-p // q)
    if c > 0:
        return -(-LOWEST // c), HIGHEST // c
    if c < 0:
        return -(-HIGHEST // c), LOWEST // c
    return LOWEST, HIGHEST


# operator -> (its constant operand, whether that is on the left) -> the range of the other
# operand for which the result stays in int64's range (exact: Python ints)
_BOUNDS: dict[str, Callable[[int, bool], tuple[int, int]]] = {
    "+": _sum_bounds, "-": _difference_bounds, "*": _product_bounds,
}


def _bounded(symbol: str, value: Any, low: int, high: int) -> None:
    if not isinstance(value, torch.Tensor):
        return
    if low > HIGHEST or high < LOWEST:  # no int64 keeps the result in range
        ok = torch.zeros_like(value, dtype=torch.bool)
    elif low > LOWEST and high < HIGHEST:
        ok = (value >= low) & (value <= high)
    elif low > LOWEST:
        ok = value >= low
    elif high < HIGHEST:
        ok = value <= high
    else:
        return
    in_int64(symbol, ok)


def not_lowest(value: torch.Tensor, symbol: str) -> None:
    """``-k`` and ``abs(k)`` of int64's minimum: 2**63 in Python, itself in int64."""
    in_int64(symbol, value != LOWEST)


def in_int64(symbol: str, ok: torch.Tensor) -> None:
    """Where ``ok`` is false, ``symbol``'s Python int is past int64's range."""
    specialised(symbol, ok, _WRAPS)


def _within_int64(symbol: str, a: Any, b: Any, result: torch.Tensor) -> None:
    """An int power, left shift, sum, difference or product wraps past int64, where
    Python's int grows: refused. The double estimate is within far less than 2**63 of the
    true value, and a wrapped result is 2**64 or more away from it, so the test is
    exact."""
    ta, tb = int_tensor(a).double(), int_tensor(b).double()
    exact = ta ** tb if symbol == "**" else ta * torch.exp2(tb) if symbol == "<<" \
        else ta + tb if symbol == "+" else ta - tb if symbol == "-" else ta * tb
    if symbol in ("*", "<<", "**"):  # 0 * inf: 0, not nan (a sum of int64s is finite)
        exact = torch.where(ta == 0, torch.zeros_like(exact), exact)
    in_int64(symbol, (result.double() - exact).abs() < 2.0 ** 63)


def exact_doubles(*operands: Any) -> None:
    """``/`` of two ints: Python divides the ints exactly and rounds once; the program
    divides their doubles, which is the same where both ints are doubles exactly (IEEE
    division rounds the exact quotient once). An int that is not (past 2**53, odd enough)
    raises ``SpecializationError``; an int constant that is not refuses the export."""
    for value in operands:
        if type(value) is int and -2 ** 63 <= value < 2 ** 63 and float(value) != value:
            raise SpecializationError(
                f"`/` of scalar reads by the int constant {value}: it is not a double "
                f"exactly, and this program divides doubles where Python divides ints "
                f"exactly; write the constant as the float you mean, or divide "
                f"float(...) of the read")
        if isinstance(value, torch.Tensor) and value.dtype == torch.int64:
            back = value.double()
            inside = back < 2.0 ** 63  # the double nearest 2**63 - 1 is 2**63
            exact = inside & (torch.where(inside, back, torch.zeros_like(back)).long()
                              == value)
            specialised("/", exact, "an int divided here is not a double exactly (past "
                                     "2**53); Python divides ints exactly, this program "
                                     "divides their doubles")


def int_tensor(value: Any) -> torch.Tensor:
    # Python's bool arithmetic is int arithmetic: a bool operand is an int64 here
    return number_tensor(value, torch.int64 if isinstance(value, bool | torch.SymBool) else None)


def specialised(symbol: str, ok: torch.Tensor, why: str) -> None:
    run_check(SITE, ok, GUARD_ERROR, encode_message(f"`{symbol}` of scalar reads: {why}"))
