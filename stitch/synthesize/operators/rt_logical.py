"""Predicates in rewritten code: ``and``/``or``/``not`` and chained comparisons over
tensors, sizes and Python values, each keeping Python's short-circuit where an operand may
raise on the inputs the earlier ones rule out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .rt_predicate import pred, size_pred
from .rt_symbolic import is_unbacked, number_kind, number_truth


def _data_dependent(value: Any, sizes: bool = False) -> bool:
    """A tensor, or a symbolic number only known at run time (an unbacked size after
    ``nonzero``/mask indexing): truthiness of either is decided by the graph, not Python.
    ``sizes``: in a test on sizes torch.export would decide (``size_pred``), a number that
    follows a dynamic dimension too."""
    return isinstance(value, torch.Tensor) or is_unbacked(value) or (
        sizes and size_number(value))


def size_number(value: Any) -> bool:
    return isinstance(value, int | float | torch.SymInt | torch.SymFloat | torch.SymBool) \
        and number_kind(value) == "symbolic"


# ``sizes=SYMBOLIC``: a test on sizes whose truth stays a SymBool (no tensor, no guard):
# ``int(a or b)`` in a loop's count (bounded_loop's size_int follows it with sym_ite)
SYMBOLIC = "symbolic"


def sym_truth(value: Any) -> Any:
    return number_truth(value)


def size_truth(function: Callable, value: Any) -> Any:
    """``bool(value)`` in a test on sizes whose truth stays symbolic (``padding = bool(pad_b
    or pad_r)``): a size's truth as a ``SymBool``; anything else, or a shadowed ``bool``,
    the call as written."""
    import builtins

    if function is builtins.bool and size_number(value):
        return sym_truth(value)
    return function(value)


def truth(value: Any) -> Any:
    """A predicate of ``value``: a 0-d bool tensor for a tensor or a size (no guard)."""
    return size_pred(value) if size_number(value) else pred(value)


def logical_and(*thunks: Callable[[], Any], guarded: bool = False,
                sizes: bool | str = False) -> Any:
    """``a and b and ...`` as a predicate, each operand a thunk. Python values keep Python's
    short-circuit (a falsy Python operand decides the whole predicate); tensors and sizes
    from data (``boxes.numel() > 4000`` after mask indexing) combine with
    ``torch.logical_and``. Only truthiness is kept, as in an ``if`` test."""
    return _logical(thunks, True, torch.logical_and, guarded, sizes)


def logical_or(*thunks: Callable[[], Any], guarded: bool = False,
               sizes: bool | str = False) -> Any:
    """``a or b or ...``: as ``logical_and`` with the roles of true and false swapped."""
    return _logical(thunks, False, torch.logical_or, guarded, sizes)


def _logical(thunks, neutral: bool, combine: Callable, guarded: bool, sizes: bool) -> Any:
    """``and`` (``neutral`` True) or ``or`` (False): a Python operand that is not neutral
    decides the whole predicate; data combines with ``combine``; ``guarded``: an operand
    after data is computed only where Python would reach it."""
    result: Any = neutral
    for thunk in thunks:
        if guarded and _data_dependent(result, sizes):
            if not (size_number(result) and _size_only(thunk)):
                result = _only_when(result, thunk, taken=neutral)
                continue
        value = thunk()
        if sizes == SYMBOLIC and size_number(value) \
                and (result is neutral or size_number(result)):
            held = sym_truth(value)
            result = held if result is neutral else \
                (result & held if neutral else result | held)
        elif _data_dependent(value, sizes):
            result = value if result is neutral else _combined(truth(result), truth(value),
                                                               neutral, combine)
        elif (not value) if neutral else value:  # (Dynamo: bool() of a size may be symbolic)
            return value
    return result


def _combined(a: Any, b: Any, neutral: bool, combine: Callable) -> Any:
    """``combine`` of two truths, either of which may be a Python bool (a test on sizes
    their ranges decide: ``size_pred``)."""
    for known, other in ((a, b), (b, a)):
        if isinstance(known, bool):
            return other if known is neutral else known
    return combine(a, b)


def _size_only(thunk: Callable[[], Any]) -> bool:
    """While torch.export traces: the operand is a test on sizes or a Python value, made
    without a tensor op (run on the fake values, nothing traced). Made unconditionally, it
    cannot fail at run time where the earlier operands rule it out, so it needs no
    torch.cond (whose arm Dynamo traces, and which cannot take a size in its closure)."""
    from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing

    from .rt_state import is_tracing

    if torch.compiler.is_dynamo_compiling() or not is_tracing():
        return False
    try:
        with disable_proxy_modes_tracing(), _no_tensor_ops() as ops:
            value = thunk()
    except Exception:  # noqa: BLE001 - it may raise where not reached: under torch.cond
        return False
    return not ops and not isinstance(value, torch.Tensor)


class _no_tensor_ops(torch.overrides.TorchFunctionMode):
    """Counts the torch functions called inside it."""

    def __enter__(self):
        super().__enter__()
        self.calls: list = []
        return self.calls

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls.append(func)
        return func(*args, **(kwargs or {}))


def _only_when(result: Any, thunk: Callable[[], Any], taken: bool) -> torch.Tensor:
    """The next operand of ``and`` (``taken``: computed only where ``result`` holds) or
    ``or`` (only where it does not), under torch.cond: ``guarded`` is set where an operand
    can raise on the inputs the earlier ones rule out (``i < n and x[i] > 0``), which
    computing every operand, as torch.logical_and does, would raise on."""
    def operand() -> torch.Tensor:
        value = thunk()  # a size's truth as size_pred makes it (as_tensor takes no SymBool)
        return truth(value if isinstance(value, torch.Tensor) or size_number(value)
                      else torch.as_tensor(value)).clone()

    def constant() -> torch.Tensor:
        return torch.full((), not taken, dtype=torch.bool)

    first = truth(result)
    return torch.cond(first, operand, constant, ()) if taken else \
        torch.cond(first, constant, operand, ())


def compare_chain(first: Callable[[], Any], *rest: Any, guarded: bool = False,
                  sizes: bool | str = False) -> Any:
    """``a < b <= c`` in a test: ``rest`` alternates an operator's name (``operator.lt``...)
    and a thunk of the next operand; each operand is made once, as Python makes it, and a
    comparison that is False in Python ends the chain. The truth, as ``logical_and``.
    ``guarded``: the last operand may raise where the comparisons before it are False
    (``0 < v < int(w)``), so after a comparison on data it is made under torch.cond, only
    where they hold, as in ``logical_and``. ``sizes``: as ``logical_and``'s."""
    import operator

    left, result = first(), True
    for i in range(0, len(rest), 2):
        if guarded and i == len(rest) - 2 and _data_dependent(result, sizes):
            compare, make, before = getattr(operator, rest[i]), rest[i + 1], left
            return _only_when(result, lambda c=compare, m=make, b=before: c(b, m()),
                              taken=True)
        right = rest[i + 1]()
        value = getattr(operator, rest[i])(left, right)
        if sizes == SYMBOLIC and size_number(value) \
                and (result is True or size_number(result)):
            result = value if result is True else result & value
        elif _data_dependent(value, sizes):
            result = value if result is True else _combined(truth(result), truth(value),
                                                            True, torch.logical_and)
        elif not value:
            return value
        left = right
    return result


def logical_not(value: Any, sizes: bool | str = False) -> Any:
    if sizes == SYMBOLIC and size_number(value):
        return torch.sym_not(sym_truth(value))
    if not _data_dependent(value, sizes):
        return not value
    held = truth(value)  # a size's truth the dimension's range decides is a Python bool
    return torch.logical_not(held) if isinstance(held, torch.Tensor) else not held
