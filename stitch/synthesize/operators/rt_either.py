"""``a or b`` and ``a and b`` used as values where an operand is a number read.

Python's ``or`` gives its first truthy operand, ``and`` its first falsy one; both ask
``bool()`` of the operand before, which on a read (a 0-d tensor, or a size read from data)
is a read of data: a break under torch.compile, a guard torch.export cannot decide.
``number_ops.py`` routes each such expression here, each operand a thunk::

    count = torch.bincount(index, minlength=dim_size or 0)
 -> count = torch.bincount(index, minlength=__stitch_rt__.number_either(
        "or", lambda: dim_size, lambda: 0))

Where the operand decided on is a read and the next one a number of the same kind (int,
float or bool: the value then has that kind whichever operand Python gives), the value is
selected in the graph (``torch.where`` on the read's truth: 0, 0.0, -0.0 and False are
false, NaN is true, as in Python) and marked as a read of that kind; an unbacked size
selects with ``torch.sym_ite``. Anything else (a Python operand, ``None``, operands of two
kinds, whose result's type would follow the data) is Python's ``or``/``and`` as written.
``number_ops`` routes only expressions whose later operands cannot raise (``may_raise``):
every operand is computed, as a select computes both sides.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .rt_arith import number_kind
from .rt_logical import size_number
from .rt_symbolic import is_unbacked, number_truth
from .rt_values import as_number, number_tensor

_INT64 = (-(2 ** 63), 2 ** 63 - 1)


def number_either(op: str, *thunks: Callable[[], Any], numbers: bool = False,
                  sizes: bool = False) -> Any:
    """``thunks[0]() or thunks[1]() or ...`` (``op`` "or"), or ``and``, with Python's result
    where an operand is a read (see the module's docstring). ``sizes``: the expression is a
    test on sizes torch.export would decide (``padding = pad_b or pad_r``): a number that
    follows a dynamic dimension is decided in the graph too, as an unbacked size is."""
    value = thunks[0]()
    for thunk in thunks[1:]:
        if not (_read(value) or (sizes and size_number(value))):
            # a Python value decides as in Python, short-circuit kept
            if bool(value) == (op == "or"):
                return value
            value = thunk()
            continue
        other = thunk()
        value = _select(op, value, other, numbers)
    return value


def _read(value: Any) -> bool:
    return (isinstance(value, torch.Tensor) and value.dim() == 0
            and number_kind(value) is not None) or is_unbacked(value)


def _select(op: str, value: Any, other: Any, numbers: bool) -> Any:
    """``value or other`` (``and``) where ``value`` is a read."""
    kind, other_kind = number_kind(value, numbers), number_kind(other, numbers)
    if kind is None or kind != other_kind or not _fits(other):
        return (value or other) if op == "or" else (value and other)  # Python's own
    if not isinstance(value, torch.Tensor) and not isinstance(other, torch.Tensor):
        truth = number_truth(value)  # a symbolic size, and an int or another size
        return _ite(truth, value, other) if op == "or" else _ite(truth, other, value)
    like = value if isinstance(value, torch.Tensor) else other
    value, other = (v.to(like.dtype) if isinstance(v, torch.Tensor)
                    else number_tensor(v, like.dtype, like.device) for v in (value, other))
    truth = value != 0
    picked = torch.where(truth, value, other) if op == "or" else \
        torch.where(truth, other, value)
    return as_number(picked)


def _ite(truth: Any, then: Any, other: Any) -> Any:
    """``then if truth else other`` on numbers of one kind, symbolic: ``torch.sym_ite`` takes
    operands of one type only, so an int beside a ``SymInt`` is selected arithmetically (a
    0/1 size times each side: exact on ints) and a bool beside a ``SymBool`` logically."""
    if type(then) is type(other):
        return torch.sym_ite(truth, then, other)
    if isinstance(then, bool | torch.SymBool):
        return (truth & then) | (torch.sym_not(truth) & other)
    if isinstance(then, int | torch.SymInt):
        one = torch.sym_ite(truth, 1, 0)
        return one * then + (1 - one) * other
    # floats: 0 * inf is NaN, so no arithmetic select; Python's rule decides
    return then if truth else other


def _fits(other: Any) -> bool:
    """A Python int past int64 has no tensor of the read's kind: Python's rule decides."""
    return not (type(other) is int and not _INT64[0] <= other <= _INT64[1])
