"""Builtin, ``math`` and ``operator`` functions on scalar reads, as Python computes them.

A read kept as a 0-d tensor (``rt_values.scalar``) carries the mark of the Python number it
was. A function the model calls on it as a number would see a tensor: ``abs(k)`` gave an
unmarked tensor, so ``1 / abs(k)`` at 0 was inf (Python raises); ``math.sqrt(v)`` read the
tensor back to the host (a graph break, an export refused); ``sum(reads)`` added as
tensors. ``number_ops.py`` routes a call of one of these names whose argument comes from a
read here:

    abs(k)            ->  __stitch_rt__.number_call("abs", abs, k)
    math.floor(v)     ->  __stitch_rt__.number_call("math.floor", math.floor, v)

``CALLS`` below is the whole table, by the name the source calls; the rule applies only
where the function called is the one of that name (a shadowed ``abs`` is called as
written: compared by identity, as Dynamo, which traces this in torch.cond arms, cannot
hash a builtin). The rule applies where every argument was a number in the model, as
for operators (``rt_arith``); anything else is the call as written.
"""

from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Callable
from typing import Any

import torch

from ...errors import StitchError
from .python_errors import MATH_DOMAIN, MATH_RANGE, python_error
from .rt_arith import COMPARE, calm, number_compare, number_kind, number_op, number_unary
from .rt_checks import check, encode_message, run_check
from .rt_int64 import HIGHEST, LOWEST, SITE, in_int64, not_lowest
from .rt_state import is_tracing
from .rt_values import as_number, check_finite_for_int, extreme, scalar


def number_call(name: str, function: Callable, *args: Any, numbers: bool = False,
                when: Any = None) -> Any:
    """``function(*args)`` with Python's rules where ``function`` is ``CALLS[name]``'s and
    every argument was a number (``numbers``: by the source, where a mark cannot be
    seen; ``when``: as for ``rt_arith.number_op``)."""
    known, rule = CALLS.get(name, (None, None))
    if function is not known and function is not _bound_now(name):
        return function(*args)
    return rule(function, tuple(calm(when, a) for a in args), numbers)


# builtins that fold a list, applied to ``<tensor>.tolist()`` (``canonicalize/listed_folds``)
FOLDS = ("max", "min", "sum", "len")
LISTED = ("of a tensor's `.tolist()`: of integers while traced, the tensor's own reduction "
          "read as a number")


def listed(site: str, name: str, tensor: Any) -> Any:
    """``<builtin name>(tensor.tolist())`` (the rewrite checked that ``name`` is the builtin
    there). While traced, on a 1-D tensor of integers or bools, the same number from the
    tensor itself: the list's length is known only at run time there, and ``tolist`` would
    fix it to the traced one. Python's pick is the tensor's for these: integers are exact,
    ties give one value, and an empty list raises what Python raises (a check in the
    graph). Floats (NaN order, the sum's rounding), other ranks and anything not traced: the
    call as written."""
    if name not in FOLDS or not isinstance(tensor, torch.Tensor) \
            or tensor.dim() != 1 or tensor.dtype.is_floating_point or tensor.is_complex() \
            or not (torch.compiler.is_dynamo_compiling() or is_tracing()):
        return getattr(builtins, name)(tensor.tolist())
    if name == "len":
        return tensor.shape[0]
    if name == "sum":
        return scalar(tensor.sum(), int)
    kind, text = python_error(lambda: getattr(builtins, name)([]))
    # the length as data: a test on the size itself torch.export would decide from the
    # size's assumed range (at least 2) and drop
    nonempty = torch.full((), tensor.shape[0], dtype=torch.int64) > 0
    check(site, nonempty, encode_message(text), getattr(builtins, kind))
    # an empty list gives 0 in the graph, whose ops then run as on an empty input, so the
    # check raises Python's error (it may run after the graph: Settings.checks) rather than
    # a reduction of nothing or a slice to the fold's identity
    bounds = (False, True) if tensor.dtype == torch.bool else (
        torch.iinfo(tensor.dtype).min, torch.iinfo(tensor.dtype).max)
    padded = torch.cat([tensor, tensor.new_full((1,), bounds[name == "min"])])
    folded = padded.max() if name == "max" else padded.min()
    return scalar(torch.where(nonempty, folded, torch.zeros_like(folded)),
                 bool if tensor.dtype == torch.bool else int)


def _bound_now(name: str) -> Any:
    """What ``name`` names right now: torch.export's non-strict trace rebinds
    ``builtins.max``/``min`` (to take tensors), and the model's ``max`` is then that."""
    module, _, attr = name.rpartition(".")
    return getattr(MODULES[module] if module else builtins, attr, None)


def _numbers(args: tuple, numbers: bool) -> list[str] | None:
    """Each argument's kind, where every one was a number and one is a read's tensor."""
    if not any(isinstance(a, torch.Tensor) for a in args):
        return None
    kinds = [number_kind(a, numbers) for a in args]
    return None if None in kinds else kinds


def _abs(function, args, numbers):
    kinds = _numbers(args, numbers)
    if kinds is None or len(args) != 1:
        return function(*args)
    value = args[0].long() if kinds[0] == "bool" else args[0]
    if kinds[0] == "int":
        not_lowest(value, "abs")
    return as_number(torch.abs(value))


def _to_int(rounding: Callable[[torch.Tensor], torch.Tensor]):
    """``math.floor``/``ceil``/``trunc`` and one-argument ``round``: an int, of a float
    rounded (inf and NaN raise as ``int()`` does, past int64 ``SpecializationError``), of an
    int or bool the int."""
    def rule(function, args, numbers):
        kinds = _numbers(args, numbers)
        if kinds is None or len(args) != 1:
            return _round_digits(function, args, numbers) if function is builtins.round \
                else function(*args)
        value = args[0]
        if kinds[0] == "float":
            check_finite_for_int(value)
            return as_number(rounding(value).long())
        return as_number(value.long())
    return rule


def _round_digits(function, args, numbers):
    """``round(v, n)``, ``n`` an int: of a float, Python's exact decimal rounding
    (``_round_float``); of an int, the int for ``n >= 0``, else the nearest multiple of
    ``10 ** -n``, ties to even."""
    kinds = _numbers(args[:1], numbers)
    if kinds is None or len(args) != 2 or type(args[1]) is not int:
        return function(*args)
    value, digits = args[0], args[1]
    if kinds[0] == "float":
        return as_number(_round_float(value.double(), digits))
    value = value.long()
    if digits >= 0:
        return as_number(value)
    step = 10 ** -digits
    rest = torch.remainder(value, step)  # Python's modulo: 0 <= rest < step
    odd = torch.remainder(torch.div(value, step, rounding_mode="floor"), 2) == 1
    up = (2 * rest > step) | ((2 * rest == step) & odd)
    # the multiple below or above, each in int64's range only on its own side
    in_int64("round", torch.where(up, value <= HIGHEST - (step - rest), value >= LOWEST + rest))
    return as_number(torch.where(up, value + (step - rest), value - rest))


def _round_float(value: torch.Tensor, digits: int) -> torch.Tensor:
    """Python's ``round(v, n)`` for ``0 <= n <= 22``: the double nearest the decimal that
    rounds ``v``'s exact value to ``n`` digits, ties to even. ``v * 10**n`` is split into
    its double and its exact rounding error (Veltkamp/Dekker), so a tie in the double that
    is no tie in ``v`` (``round(0.35, 1)`` is 0.3: 0.35 is below 0.35) rounds as Python's;
    the quotient of two exact integers is the nearest double, as Python's. Past ``v * 10**n
    = 2**52`` there are no digits to round: ``v`` itself."""
    if not 0 <= digits <= 22:
        raise StitchError(f"round(v, {digits}) of a float read: stitch rounds a float read to 0 "
                          "to 22 digits exactly as Python does, not to "
                          f"{digits}; round with torch.round in the model instead")
    scale = float(10 ** digits)  # exact up to 10**22
    product, error = _two_product(value, scale)
    whole = product.abs() >= 2.0 ** 52
    safe = torch.where(whole, torch.zeros_like(product), product)
    low = torch.floor(safe)
    past_half = (safe - low) - 0.5  # exact: a multiple of ulp(product), or 0
    odd = torch.remainder(low, 2) == 1
    up = (past_half > 0) | ((past_half == 0) & ((error > 0) | ((error == 0) & odd)))
    rounded = (low + up.double()) / scale
    rounded = torch.copysign(rounded, value)  # round(-0.2, 0) is -0.0
    return torch.where(whole | ~torch.isfinite(value), value, rounded)


def _two_product(a: torch.Tensor, b: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``a * b`` as a double and its exact rounding error (Dekker's product with
    Veltkamp's split: no FMA needed)."""
    product = a * b
    a_high, a_low = _split(a)
    b_high, b_low = _split(torch.full_like(a, b))
    error = ((a_high * b_high - product) + a_high * b_low + a_low * b_high) + a_low * b_low
    return product, error


def _split(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    scaled = 134217729.0 * x  # 2**27 + 1
    high = scaled - (scaled - x)
    return high, x - high


def _math(torch_function: Callable, domain: Callable | None = None,
          finite: bool = False):
    """A ``math`` function of one float: torch's, and where Python's raises, the check
    that raises as it does (outside ``domain``: ``ValueError('math domain error')``; a
    finite argument whose result overflows: ``OverflowError('math range error')``)."""
    def rule(function, args, numbers):
        kinds = _numbers(args, numbers)
        if kinds is None or len(args) != 1:
            return function(*args)
        value = args[0].double()
        if domain is not None:
            run_check(SITE, domain(value) | torch.isnan(value), MATH_DOMAIN[0],
                     encode_message(MATH_DOMAIN[1]))
        result = torch_function(value)
        if finite:
            run_check(SITE, torch.isfinite(result) | ~torch.isfinite(value), MATH_RANGE[0],
                     encode_message(MATH_RANGE[1]))
        return as_number(result)
    return rule


def _predicate(torch_function: Callable):
    """``math.isnan``/``isinf``/``isfinite``: a bool."""
    def rule(function, args, numbers):
        if _numbers(args, numbers) is None or len(args) != 1:
            return function(*args)
        return as_number(torch_function(args[0]))
    return rule


def _binary(symbol: str):
    def rule(function, args, numbers):
        if len(args) != 2:
            return function(*args)
        op = number_compare if symbol in COMPARE else number_op
        return op(symbol, *args, numbers)
    return rule


def _unary(symbol: str):
    def rule(function, args, numbers):
        return number_unary(symbol, *args, numbers) if len(args) == 1 else function(*args)
    return rule


def _divmod(function, args, numbers):
    if len(args) != 2:
        return function(*args)
    return number_op("//", *args, numbers), number_op("%", *args, numbers)


def _pow(function, args, numbers):
    return number_op("**", *args, numbers) if len(args) == 2 else function(*args)


def _sum(function, args, numbers):
    """``sum(xs[, start])``: ``start + x0 + x1 ...`` with Python's ``+`` on each pair (the
    fold ``sum`` itself computes)."""
    if not 1 <= len(args) <= 2:
        return function(*args)
    total = args[1] if len(args) == 2 else 0
    for value in args[0]:
        total = number_op("+", total, value, numbers)
    return total


def _extreme(function, args, numbers):
    """``min(xs)`` / ``max(xs)`` of one list or tuple of numbers: as ``min(x0, x1, ...)``
    (``rt_values.extreme``: Python's pick, NaN and ties included)."""
    if len(args) != 1:
        return extreme(function, *args)
    if not isinstance(args[0], list | tuple) or len(args[0]) < 2 \
            or _numbers(tuple(args[0]), numbers) is None:
        return function(*args)  # a tensor, an iterator, or not all numbers: as written
    return extreme(function, *args[0])


def _conversion(kind: type):
    """``int(k)`` / ``float(k)`` / ``bool(k)`` of a read: ``scalar`` (a marked 0-d tensor,
    ``int`` of inf or NaN raising as Python's)."""
    def rule(function, args, numbers):
        if len(args) != 1 or _numbers(args, numbers) is None:
            return function(*args)
        return scalar(args[0], kind)
    return rule


_RULES: dict[Callable, Callable] = {
    builtins.abs: _abs, math.fabs: _math(torch.abs),
    builtins.round: _to_int(torch.round), math.floor: _to_int(torch.floor),
    math.ceil: _to_int(torch.ceil), math.trunc: _to_int(torch.trunc),
    builtins.int: _conversion(int), builtins.float: _conversion(float),
    builtins.bool: _conversion(bool),
    builtins.divmod: _divmod, builtins.pow: _pow, builtins.sum: _sum,
    builtins.min: _extreme, builtins.max: _extreme,
    math.sqrt: _math(torch.sqrt, lambda v: v >= 0),
    math.log: _math(torch.log, lambda v: v > 0), math.log2: _math(torch.log2, lambda v: v > 0),
    math.log10: _math(torch.log10, lambda v: v > 0),
    math.exp: _math(torch.exp, finite=True),
    math.isnan: _predicate(torch.isnan), math.isinf: _predicate(torch.isinf),
    math.isfinite: _predicate(torch.isfinite),
    **{getattr(operator, name): _binary(symbol) for name, symbol in (
        ("add", "+"), ("sub", "-"), ("mul", "*"), ("truediv", "/"), ("floordiv", "//"),
        ("mod", "%"), ("pow", "**"), ("lshift", "<<"), ("rshift", ">>"), ("and_", "&"),
        ("or_", "|"), ("xor", "^"), ("lt", "<"), ("le", "<="), ("gt", ">"), ("ge", ">="),
        ("eq", "=="), ("ne", "!="))},
    operator.neg: _unary("-"), operator.pos: _unary("+"), operator.invert: _unary("~"),
}
MODULES = {"math": math, "operator": operator}


def _source_name(function: Callable) -> str:
    """How the source calls ``function``: ``abs``, ``math.floor``, ``operator.add``."""
    for prefix, module in MODULES.items():
        if getattr(module, function.__name__, None) is function \
                and getattr(builtins, function.__name__, None) is not function:
            return f"{prefix}.{function.__name__}"
    return function.__name__


# the whole table, by the name the source calls (number_ops.py routes these names)
CALLS: dict[str, tuple[Callable, Callable]] = {
    _source_name(f): (f, rule) for f, rule in _RULES.items()}


def spellings(namespace: dict[str, Any]) -> dict[str, str]:
    """Other names a module's globals give these functions: ``from math import floor``
    (``floor`` -> ``math.floor``), ``import math as m`` (``m.sqrt`` -> ``math.sqrt``)."""
    found = {}
    for name, value in namespace.items():
        for canonical, (function, _rule) in CALLS.items():
            if value is function and name != canonical:
                found[name] = canonical
            prefix, _, attr = canonical.rpartition(".")
            if prefix and value is MODULES[prefix] and name != prefix:
                found[f"{name}.{attr}"] = canonical
    return found
