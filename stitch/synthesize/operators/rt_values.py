"""Values in rewritten code: scalar reads kept as 0-d tensors, branch predicates and their
``and``/``or``/``not``, and branch outputs that must not alias branch inputs."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree

from capture import torch_messages as tm

from ...epilogue.entries import NUMBER_KIND
from ...errors import StitchError
from .python_errors import INT_OF
from .rt_checks import GUARD_ERROR, encode_message, run_check


def is_tensor(value: Any) -> bool:
    return isinstance(value, torch.Tensor)


def scalar(value: Any, kind: Callable | None = None) -> Any:
    """``t.item()``, ``float(t)``, ``int(t)``, ``bool(t)``: tensors stay 0-d tensors."""
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise RuntimeError(f"a Tensor with {value.numel()} elements cannot be converted "
                               "to Scalar")
        read = _read(value.reshape(()), kind)
        if read.dtype == value.dtype:
            # not converted, so a view of the tensor read: ``k += 1`` must not write it
            read = read.clone()
        return as_number(read)
    if kind is int and isinstance(value, torch.SymInt):
        # already an int, symbolic (a number read with ``.tolist()`` while exporting): int()
        # would guard on a value known only at run time; the same number, kept symbolic
        return value
    if kind is int and isinstance(value, torch.SymFloat):  # ``int(x.shape[1] ** 0.5)``
        return torch.sym_int(value)  # truncated as int() does, symbolic: no guard
    if kind is float and isinstance(value, torch.SymInt | torch.SymFloat):
        return torch.sym_float(value)  # ``float(max(w - 1, 1))`` of a size: symbolic, no guard
    return kind(value) if kind is not None else value


def truth_number(value: Any) -> Any:
    """``int(test)`` of a test on sizes (``int(x.shape[0] > 3)``): 1 or 0 by the test, kept
    symbolic where ``int()`` would guard on it. Dynamo (tracing a cond's arm) evaluates
    ``torch.sym_ite`` to a constant, with a guard; there the number is a 0-d int64 tensor
    filled with the test, which it keeps symbolic."""
    if torch.compiler.is_dynamo_compiling():
        return as_number(torch.full((), value, dtype=torch.int64))
    return torch.sym_ite(value, 1, 0)


def _read(value, kind: Callable | None):
    if kind is bool:
        return value.bool()
    if kind is int and value.is_floating_point():
        check_finite_for_int(value)
        return value.trunc().long()
    if kind is int and value.dtype == torch.bool:  # int(flag): 0 or 1, added as numbers
        return value.long()
    if kind is float or value.is_floating_point() and kind is None:
        # a Python float is a double: arithmetic on the read (``int(total * 10)``) must
        # round as Python's does, not in the tensor's float32 (exact: every float16,
        # bfloat16 and float32 value is a double)
        return value.double()
    if value.dtype not in (torch.bool, torch.int64) and not value.is_complex():
        # a Python int never wraps: arithmetic on a uint8/int8/int16/int32 read
        # (``a.item() + 250``) must not wrap in the tensor's own dtype
        return value.long()
    return value


def check_finite_for_int(value: torch.Tensor) -> None:
    """``int()`` of an infinite or NaN read raises as Python's does (the graph's cast gives
    int64's minimum); of a float past int64's range, whose Python int grows, it raises
    ``SpecializationError`` (the cast wrapped)."""
    for ok, (name, text) in ((~torch.isinf(value), INT_OF["inf"]),
                             (~torch.isnan(value), INT_OF["nan"])):
        run_check("python-number", ok, name, encode_message(text))
    inside = (value >= -(2.0 ** 63)) & (value < 2.0 ** 63) | ~torch.isfinite(value)
    run_check("python-number", inside, GUARD_ERROR, encode_message(
        "an int of a float read: the float is past int64's range here; Python's int grows, "
        "this program computes int64"))


def as_number(value):
    kind = "bool" if value.dtype == torch.bool else \
        "float" if value.is_floating_point() else "int"
    try:
        setattr(value, NUMBER_KIND, kind)
    except (AttributeError, RuntimeError):  # a tensor type that takes no attributes
        pass
    return value


def same_kind(value: torch.Tensor, like: torch.Tensor, *others: Any) -> torch.Tensor:
    """``value`` marked as a read of the kind ``like`` is marked with, if any (and every
    one of ``others`` is marked with too)."""
    kind = getattr(like, NUMBER_KIND, None)
    if any(getattr(o, NUMBER_KIND, None) != kind for o in others):
        return value
    # not under Dynamo: torch.cond traces arms with it, and marking an arm's input there is
    # a side effect it refuses ("Mutating a variable from outside the scope of this HOP")
    if kind is not None and value.dim() == 0 and not torch.compiler.is_dynamo_compiling():
        try:
            setattr(value, NUMBER_KIND, kind)
        except (AttributeError, RuntimeError):
            pass
    return value


def tensor_equal(a: Any, b: Any, *, _method: bool = False) -> Any:
    """``torch.equal(a, b)`` (``a.equal(b)`` with ``_method``): same shape and equal values
    (across dtypes, NaN unequal), as a 0-d bool tensor for a graph (shapes are known while
    tracing). Anything but two tensors: the call as written."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return a.equal(b) if _method else torch.equal(a, b)
    if a.shape != b.shape:
        return False
    return as_number((a == b).all())


def tensor_allclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08,
                    equal_nan: bool = False, *, _method: bool = False) -> Any:
    """``torch.allclose`` (``a.allclose(b)`` with ``_method``), which is
    ``isclose(...).all()``, as a 0-d bool tensor."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        call = a.allclose if _method else functools.partial(torch.allclose, a)
        return call(b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    return as_number(torch.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan).all())


class _Unbound:
    """A caller's local the rest of the caller reads but that may be unbound when the call is
    made (``caller_continuation``): the rest's parameter default, deleted again at the rest's
    start, so a read raises as the original function's would."""

    def __repr__(self) -> str:
        return "UNBOUND"


UNBOUND = _Unbound()


def extreme(function: Callable, *args: Any) -> Any:
    """``min(a, b, ...)`` / ``max(a, b, ...)`` of reads kept as 0-d tensors, as Python picks:
    the first argument, replaced by each later one that compares strictly less (greater)
    (``max(1.0, nan)`` is 1.0; torch.maximum, which tracing gives builtins' min/max on
    tensors, is nan). Anything else, or a shadowed min/max, the call as written."""
    import builtins

    if function is not builtins.min and function is not builtins.max or len(args) < 2 \
            or not any(isinstance(a, torch.Tensor) for a in args) \
            or any(isinstance(a, torch.Tensor) and a.numel() != 1 for a in args):
        return function(*args)
    best = args[0]
    for value in args[1:]:
        better = value < best if function is builtins.min else value > best
        if not isinstance(better, torch.Tensor):
            best = value if better else best
            continue
        pair = (best, value)
        if _kind(best) != _kind(value):
            _refuse_mixed_kinds(function.__name__, pair)
        dtype = torch.float64 if any(isinstance(v, float) or isinstance(v, torch.Tensor)
                                     and v.is_floating_point() for v in pair) else \
            torch.bool if all(isinstance(v, bool) or isinstance(v, torch.Tensor)
                              and v.dtype == torch.bool for v in pair) else torch.int64
        best = as_number(torch.where(better.reshape(()),
                                      number_tensor(value, dtype, better.device),
                                      number_tensor(best, dtype, better.device)))
    return best


def _kind(value: Any) -> str:
    """A number's Python kind (a read kept as a tensor: its dtype's)."""
    if isinstance(value, torch.Tensor):
        return ("bool" if value.dtype == torch.bool else
                "float" if value.is_floating_point() else "int")
    import numbers

    import numpy as np

    return ("bool" if isinstance(value, bool | np.bool_ | torch.SymBool) else
            "int" if isinstance(value, numbers.Integral | torch.SymInt) else "float")


def _refuse_mixed_kinds(name: str, pair: tuple) -> None:
    """``max(v, 0)`` of a float read: Python returns whichever object wins, the int 0 or the
    float ``v``, so the result's kind (``0`` or ``0.0`` printed, returned) follows the
    data; the graph holds one kind, so a program would print `clipped 0.0` where eager
    prints `clipped 0`."""
    import os
    import sys

    frame, here = sys._getframe(1), os.path.dirname(__file__)
    while frame is not None and (frame.f_code.co_filename.startswith(here)
                                 or "/torch/" in frame.f_code.co_filename):
        frame = frame.f_back
    where = f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame else "min/max"
    kinds = " and ".join(("an " if _kind(v) == "int" else "a ") + _kind(v) for v in pair)
    raise StitchError(
        f"{where}: {name}() of {kinds}, one read from a tensor: Python returns whichever wins, so the result's kind "
        "(printed `0` or `0.0`, returned as an int or a float) depends on the data, and the "
        f"graph holds one kind. Write both of one kind (`{name}(v, 0.0)`, "
        f"`float({name}(...))`), as the model means it")


def number_tensor(value: Any, dtype: torch.dtype | None = None,
                  device: torch.device | None = None) -> torch.Tensor:
    """A 0-d tensor of a Python number (or a symbolic one), on ``device``: of ``dtype``,
    else of the number's kind (bool, int64, float64: a Python float is a double, and
    ``torch.as_tensor(0.1)`` is float32, 0.10000000149). A one-element tensor is itself,
    converted to ``dtype`` where one is given."""
    if isinstance(value, torch.Tensor):
        return value if dtype is None else value.reshape(()).to(dtype)
    if dtype is None:
        dtype = (torch.bool if isinstance(value, bool | torch.SymBool) else
                 torch.int64 if isinstance(value, int | torch.SymInt) else torch.float64)
    return torch.scalar_tensor(value, dtype=dtype, device=device)


# Retrying a cond/while_loop whose outputs alias a tensor the branch closes over: clone all.
# A module global (not RT): branch code runs under Dynamo, which guards on module globals.
CLONE_ALL = False


def fresh(values: tuple, operands: tuple | None = None) -> tuple:
    """Branch outputs must not alias branch inputs (torch.cond and while_loop refuse). With
    the branch's ``operands``, clone only outputs that are an operand, so the graph holds no
    copy a hand-written cond would not; without them, clone every tensor. An output that
    aliases anything else (a tensor closed over) makes the trace fail, and ``trace_unaliased``
    retries it with every output cloned; a view (``rel_codes.reshape(n, -1)``) is cloned at
    once: under Dynamo (the census, a nested cond) a failed trace cannot be retried."""
    def one(v):
        if isinstance(v, torch.Tensor) and (operands is None or CLONE_ALL
                                            or v._base is not None
                                            or any(v is o for o in operands)):
            return same_kind(v.clone(), v)
        return v

    return tuple(pytree.tree_map(one, v) for v in values)


def trace_unaliased(trace: Callable[[], Any]) -> Any:
    """Run a cond/while_loop trace; if it fails on aliasing, trace again cloning every
    branch output."""
    global CLONE_ALL
    if CLONE_ALL:
        return trace()
    try:
        return trace()
    except Exception as e:
        if not tm.matches(tm.HOP_ALIASING, str(e)):
            raise
    CLONE_ALL = True
    try:
        return trace()
    finally:
        CLONE_ALL = False


def same_meta_tensors(a: Any, b: Any) -> bool:
    return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
            and a.shape == b.shape and a.dtype == b.dtype and a.device == b.device)


SEQUENCES = (tuple, list, torch.Size)


def numbers_read(items):
    """``items`` (a tuple, list or torch.Size) with each number read (a marked 0-d tensor)
    read out as its number: in a shape, a number is Python's."""
    def read(v):
        return (isinstance(v, torch.Tensor) and v.dim() == 0
                and getattr(v, NUMBER_KIND, None) is not None)

    if not any(read(v) for v in items):
        return items
    out = [v.item() if read(v) else v for v in items]
    return torch.Size(out) if type(items) is torch.Size else type(items)(out)
