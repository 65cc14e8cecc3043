"""What Python raises on numbers, found once at import from Python itself.

Rewritten code raises these from checks in the graph (``rt_checks``), where no ``try`` can
run: the exception's class name and message are taken here from Python on sample numbers,
so a program raises what the model raises, word for word.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

# the operators whose Python errors a program repeats (rt_arith.py)
RAISING = {"/": operator.truediv, "//": operator.floordiv, "%": operator.mod,
           "<<": operator.lshift, ">>": operator.rshift, "**": operator.pow}
SAMPLES = [(a, b) for a in (1, 1.0) for b in (0, 0.0)] + [(1, -1), (0, -1), (0.0, -1.0)]


def python_error(thunk: Callable[[], Any]) -> tuple[str, str]:
    """The class name and message of what ``thunk`` raises."""
    try:
        thunk()
    except Exception as error:  # noqa: BLE001 - what Python raises is the point
        return type(error).__name__, str(error)
    raise AssertionError("expected Python to raise")


def _operator_errors() -> dict[tuple[str, str, str], tuple[str, str]]:
    found = {}
    for symbol, function in RAISING.items():
        for left, right in SAMPLES:
            try:
                function(left, right)
            except Exception as error:  # noqa: BLE001 - what Python raises is the point
                found[(symbol, repr(left), repr(right))] = (type(error).__name__, str(error))
    return found


# keyed by the operands' text (1 == 1.0 as keys)
OPERATOR_ERRORS = _operator_errors()
# ``int()`` (and ``round``, ``math.floor``...) of an infinite or NaN float
INT_OF = {name: python_error(lambda v=float(name): int(v)) for name in ("inf", "nan")}
# a float power past the largest double (``10.0 ** 400``); a float's ``*`` gives inf
POWER_OVERFLOW = python_error(lambda: 10.0 ** 400)
# ``math.sqrt(-1.0)``, ``math.log(0.0)``: outside the function's domain
MATH_DOMAIN = python_error(lambda: math.sqrt(-1.0))
# ``math.exp(1000.0)``: past the largest double
MATH_RANGE = python_error(lambda: math.exp(1000.0))
