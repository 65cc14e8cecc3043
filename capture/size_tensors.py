"""A tensor computed from sizes alone, read back as a number, is that size expression.

``torch.div(seq_len, w, rounding_mode="trunc") - 1`` (Longformer's chunk count),
``torch.tensor(x.shape[1])`` or ``torch.full((), n)`` make a 0-d tensor from Python
integers (then ``+ - * // %``, ``clamp``, ``maximum``/``minimum``, ``long()`` on it); a later ``.item()``, ``int(...)`` or the tensor given as a size (``view(b, c,
w, d)``) reads it back. torch.export's fake kernels do not carry the value through the
tensor, so each read becomes a fresh unbacked symbol: two reads of the same count (query
and key chunked alike) cannot be shown equal, and the trace fails on the first broadcast
between them, although both are ``seq_len // w`` on every input.

While ``sizes_through_tensors()`` is active (stitch's torch.export traces), each integer
0-d result of an operator in ``RULES`` whose operands are integers, SymInts or tensors
already known this way gets the same arithmetic done on the numbers, and the result is
stored as the fake tensor's ``item_memo``: the read torch makes returns that expression,
traced from the input sizes like any size arithmetic. torch drops the memo when the tensor
is changed in place (its version counter). A rule applies only where the arithmetic is
exact for every input the operands can take: ``trunc`` division only where both sides are
known non-negative, no division where the divisor can be 0; else the read stays unbacked,
as torch.export makes it.

Limits: a count used as a size gets torch's own size guards, as if the model had written
``seq_len // w``; the usual one is that it is not 1 (torch decides broadcasting on it), so
a program refuses inputs with a single chunk, and stitch's report names them.
``int(...)`` of such a tensor gives a Python int, which torch.export fixes to the traced
value (the program then guards on it). ``torch.as_tensor(n)`` of a SymInt, which torch specialises to
the traced value, is made as ``torch.tensor(n)``, which it does not.
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Callable, Iterator

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.fx.experimental.symbolic_shapes import statically_known_true
from torch.overrides import TorchFunctionMode

from .user_frames import skipped_by_torch

_Int = int | torch.SymInt


def _known(test) -> bool:
    return test if isinstance(test, bool) else statically_known_true(test)


def _nonzero(b: _Int) -> bool:
    return _known(b != 0)


def _floor(a: _Int, b: _Int) -> _Int | None:
    return a // b if _nonzero(b) else None


def _div(a: _Int, b: _Int, rounding_mode: str | None = None) -> _Int | None:
    if rounding_mode == "floor":
        return _floor(a, b)
    if rounding_mode == "trunc" and _known(a >= 0) and _known(b > 0):
        return a // b  # truncation is the floor for a non-negative quotient
    return None  # true division: a float


def _mod(a: _Int, b: _Int) -> _Int | None:
    return a % b if _nonzero(b) else None  # torch.remainder has Python's sign rule


def _alpha(op: Callable) -> Callable:
    def rule(a: _Int, b: _Int, alpha: _Int = 1) -> _Int:
        return op(a, b * alpha)
    return rule


def _clamp(a: _Int, min: _Int | None = None, max: _Int | None = None) -> _Int:  # noqa: A002
    if min is not None:
        a = torch.sym_max(a, min)
    return a if max is None else torch.sym_min(a, max)


def _same(a: _Int, dtype: torch.dtype | None = None) -> _Int | None:
    return a if dtype is None or dtype == torch.int64 else None


_T = torch._C.TensorBase
# operator -> the same arithmetic on Python integers (None: not exact here, leave it)
RULES: dict[Callable, Callable[..., _Int | None]] = {
    torch.div: _div, _T.div: _div,
    torch.floor_divide: _floor, _T.floor_divide: _floor,
    torch.Tensor.__floordiv__: _floor,
    torch.Tensor.__rfloordiv__: lambda a, b: _floor(b, a),
    torch.remainder: _mod, _T.remainder: _mod,
    torch.Tensor.__rmod__: lambda a, b: _mod(b, a),
    torch.add: _alpha(operator.add), _T.add: _alpha(operator.add),
    torch.sub: _alpha(operator.sub), _T.sub: _alpha(operator.sub),
    torch.Tensor.__rsub__: lambda a, b: b - a,
    torch.mul: operator.mul, _T.mul: operator.mul,
    torch.neg: operator.neg, _T.neg: operator.neg,
    _T.long: lambda a: a,
    torch.clamp: _clamp, _T.clamp: _clamp,
    torch.maximum: torch.sym_max, _T.maximum: torch.sym_max,
    torch.minimum: torch.sym_min, _T.minimum: torch.sym_min,
    torch.tensor: _same, torch.scalar_tensor: lambda a, dtype=None: (
        a if dtype == torch.int64 else None),
    torch.full: lambda size, fill_value, dtype=None: (
        _same(fill_value, dtype) if tuple(size) == () else None),
}
_KEYWORDS = {"rounding_mode", "alpha", "dtype", "min", "max"}  # others (out=, device=...) pass through


def _number(value) -> _Int | None:
    """``value`` as an integer, where it is one or a 0-d integer tensor known this way."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | torch.SymInt):
        return value
    if isinstance(value, FakeTensor) and value.dim() == 0 and value.dtype == torch.int64:
        memo = value.item_memo
        if isinstance(memo, int | torch.SymInt) and not isinstance(memo, bool):
            return memo
    return None


def _numbers(func, args, kwargs) -> tuple[list, dict] | None:
    """The operands as integers, or None where one is not known as an integer."""
    if func == torch.full:
        given = dict(zip(("size", "fill_value"), args, strict=False))
        size, fill = kwargs.get("size", given.get("size")), \
            kwargs.get("fill_value", given.get("fill_value"))
        if not isinstance(size, tuple | list) or _number(fill) is None:
            return None
        return [size, _number(fill)], {k: v for k, v in kwargs.items() if k == "dtype"}
    values = [_number(a) for a in args]
    if any(v is None for v in values):
        return None
    keywords = {}
    for key, value in kwargs.items():
        if key in ("alpha", "min", "max") and value is not None:
            if _number(value) is None:
                return None
            keywords[key] = _number(value)
        elif key in _KEYWORDS:
            keywords[key] = value
    return values, keywords


class _SizeTensors(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        rule = RULES.get(func)
        known = _numbers(func, args, kwargs) if rule is not None else None
        out = func(*args, **kwargs)
        if known is None or not isinstance(out, FakeTensor) or out.dim() != 0 \
                or out.dtype != torch.int64 or any(out is a for a in args):
            return out
        try:
            value = rule(*known[0], **known[1])
        except TypeError:  # an operator's spelling the rule does not take: no memo
            return out
        if value is not None:
            out.item_memo = value
        return out


@contextlib.contextmanager
def sizes_through_tensors() -> Iterator[None]:
    with skipped_by_torch(__file__), _SizeTensors():
        yield
