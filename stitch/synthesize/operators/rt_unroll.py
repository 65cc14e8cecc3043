"""Loops over ``range(n)``, ``n`` a size known only at run time: unrolled to ``n``'s static
bound (``bounded_loop``), or over the limit one ``torch.while_loop`` whose body reads and
writes by the loop's counter (``indexed_loop``: ``while_count``, ``take``, ``put``). Each
helper gives what the Python it replaced gives when ``n`` is a Python int."""

from __future__ import annotations

from typing import Any

import torch
from torch._dynamo.comptime import comptime

from .rt_inplace import KeptLoop
from .rt_predicate import NO_BREAK_YET
from .rt_state import is_tracing
from .rt_symbolic import is_unbacked, number_kind
from .rt_values import fresh, truth_number
from .rt_while_loop import carried_while_loop

# the most iterations an unrolled loop may have (one cond each): every round's census and
# export traces each one. Keypoint R-CNN's per-detection loop (bound 100: a bicubic resize
# per box), tried at 128, took its rounds to 19 minutes on 2 cores and was still refused
UNROLL_LIMIT = 32


class NoStaticBound(KeptLoop):
    """An unrolled loop's count has no static bound up to ``UNROLL_LIMIT``."""


def runs_first(i: int, least: int, test: Any) -> Any:
    """An unrolled loop's test for its ``i``-th iteration: below the count's least value
    the iteration always runs, as written (``NO_BREAK_YET``: no cond, never forced to skip,
    in eager as in the graph); from there ``test`` (``i < n``)."""
    return NO_BREAK_YET if i < least else test


def unroll_count(n: Any, location: str = "", bound: int | None = None) -> Any:
    """How many iterations the unrolled loop makes: ``n`` itself where it is a Python int
    or a size with a value (eager, Dynamo's trace), the static upper bound of a size known
    only at run time while exporting (and while Dynamo traces, as the census does).
    ``bound``: the greatest value the count's source can give (``analysis/ranges.py``), for
    a count computed as a number read from data (a 0-d tensor while traced)."""
    if isinstance(n, torch.Tensor):
        if bound is not None and bound <= UNROLL_LIMIT:
            # also eagerly: the iterations past the count run the empty side, as in the
            # graph, so a run with the loop's test forced makes the graph's iterations
            return bound
        if torch.compiler.is_dynamo_compiling():
            comptime(_refuse_unbounded)  # out of the trace: the loop is kept as written
            return n
        if not is_tracing():
            return int(n)  # eager: the count itself
        return _no_bound(n, bound, location)
    if torch.compiler.is_dynamo_compiling():
        given, bound = bound, None  # noqa: F841 - ``given``: read by _mark_bound
        comptime(_mark_bound)  # sets ``bound`` in this frame while Dynamo traces it
        return n if bound is None else bound
    if not is_unbacked(n):
        # a count whose source fixes its bound (a size-test loop's, bounded_loop): the bound,
        # each iteration past the count the cond's empty side, as for a count read from
        # data; also eagerly, so an example with the smaller count takes that side. A count
        # that follows a size with none given: the bound its expression has over the sizes'
        # ranges (``1 + int(x.shape[0] > 3)``: 2), where there is one
        if bound is None and _follows_size(n):
            bound = upper_bound(n)
        if bound is not None and bound <= UNROLL_LIMIT and (
                _follows_size(n) or type(n) is int):
            return bound
        if _follows_size(n) and is_tracing():
            # ``range(n)`` would fix the size to the traced one (a guard on it): the loop is
            # kept, and becomes one while_loop over a counter where its body allows
            # (indexed_loop), so it follows the size
            raise NoStaticBound(_why(n, bound), location)
        return n
    bound = upper_bound(n)
    if bound is None or bound > UNROLL_LIMIT:
        raise NoStaticBound(_why(n, bound), location)
    return bound


NO_STATIC_BOUND = "a loop over range(n) with n known only at run time"


def size_int(value: Any) -> Any:
    """``int(test)`` of a test on sizes in a loop's count (``range(1 + int(x.shape[0] >
    3))``, bounded_loop): a symbolic test stays a symbolic 0 or 1 (``truth_number``), so
    the count follows the size instead of a guard deciding it; a symbolic int stays itself
    (``int(x.shape[1] % 8)``) and a float truncates symbolically; anything else ``int()``."""
    if number_kind(value) == "symbolic":  # int() of a symbolic number would guard on it
        if isinstance(value, bool | torch.SymBool):  # (Dynamo's SymBool passes as a bool)
            return truth_number(value)
        if isinstance(value, torch.SymInt):
            return value  # ``int(x.shape[1] % 8)``
        if isinstance(value, torch.SymFloat):
            return torch.sym_int(value)
    return int(value)


def _follows_size(n: Any) -> bool:
    return isinstance(n, torch.SymInt) and number_kind(n) == "symbolic"


def _no_bound(n: Any, bound: int | None, location: str):
    raise NoStaticBound(_why("a number read from data" if isinstance(n, torch.Tensor) else n,
                             bound), location)


def _why(n: Any, bound: int | None) -> str:
    return (f"{NO_STATIC_BOUND} ({n}) has "
            f"{'no static bound' if bound is None else f'a bound of {bound}'}, over the "
            f"{UNROLL_LIMIT} iterations stitch unrolls: bound it (torch._check(n <= K), or "
            f"slice to at most K rows before the loop) or use it as a tensor")


def upper_bound(n: torch.SymInt) -> int | None:
    """The largest value the shape environment allows ``n`` (None: unbounded)."""
    env = getattr(n.node, "shape_env", None)
    if env is None:
        return None
    upper = env.bound_sympy(n.node.expr).upper
    try:
        return int(upper) if upper.is_finite else None
    except (TypeError, AttributeError):
        return None


def _refuse_unbounded(ctx) -> None:
    """Under Dynamo: ``NoStaticBound`` for a count read from data whose source fixes no
    bound up to ``UNROLL_LIMIT`` (raised out of the trace, as ``_mark_bound`` does)."""
    try:
        tx = ctx._i_will_not_complain_if_bc_breaks_InstructionTranslator()
        location = tx.symbolic_locals["location"].as_python_constant()
        bound = tx.symbolic_locals["bound"].as_python_constant()
    except Exception:  # noqa: BLE001 - another torch's Dynamo: range(n) as written
        return
    raise NoStaticBound(_why("a number read from data", bound), location)


def _mark_bound(ctx) -> None:
    """Under Dynamo: ``bound`` := the static bound of the frame's ``n`` when it is a size
    known only at run time with one up to ``UNROLL_LIMIT``; ``NoStaticBound`` (out of the
    trace, so the round is built again with the loop as written) when it has none."""
    from torch._dynamo.variables import ConstantVariable
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    try:
        tx = ctx._i_will_not_complain_if_bc_breaks_InstructionTranslator()
        number = getattr(tx.symbolic_locals["n"], "sym_num", None)
        if not isinstance(number, torch.SymInt):
            return
        if not free_unbacked_symbols(number):
            # a count that follows a size, in torch.cond's trace of an arm while exporting:
            # unrolled to its bound as the arm's run outside Dynamo unrolled it (the same
            # iterations, each past the count the cond's empty side); range() of it would
            # fix the size. In the census (torch.compile) the count stays as written
            if getattr(torch.compiler, "_is_non_strict_tracing_flag", False):
                given = tx.symbolic_locals["given"].as_python_constant()
                bound = upper_bound(number) if given is None else given
                if bound is not None and bound <= UNROLL_LIMIT:
                    tx.symbolic_locals["bound"] = ConstantVariable.create(bound)
            return
        bound = upper_bound(number)
        location = tx.symbolic_locals["location"].as_python_constant()
    except Exception:  # noqa: BLE001 - another torch's Dynamo: range(n) as written
        return
    if bound is None or bound > UNROLL_LIMIT:
        raise NoStaticBound(_why(number, bound), location)
    tx.symbolic_locals["bound"] = ConstantVariable.create(bound)


def while_count(site: str, n: Any, body_fn: Any, carried: tuple, reads: tuple = ()) -> tuple:
    """``for i in range(n): carried = body_fn(i, *carried, *reads)`` (``indexed_loop``;
    ``reads``: the names bound before the loop the body only reads): the plain loop wherever
    ``n`` is a Python int or a size with a value; ``torch.while_loop`` over a 0-d counter
    where it is known only at run time."""
    if not (is_unbacked(n) or (_follows_size(n) and is_tracing())):
        for i in range(n):  # a Python int, or a size with a value Dynamo holds
            carried = tuple(body_fn(i, *carried, *reads))
        return carried

    # copies: views of one tensor (``rois``, ``rois[:, 0]``) are aliased inputs, which a
    # while_loop refuses; the body only reads them
    reads = tuple(r.clone() if isinstance(r, torch.Tensor) else r for r in reads)
    start = torch.zeros((), dtype=torch.int64)

    def cond_fn(i, *state):
        return i < n

    def step(i, *state):
        return (i + 1, *fresh(tuple(body_fn(i, *state, *reads)), state))

    out = carried_while_loop(cond_fn, step, (start, *carried))
    return tuple(o.clone() if isinstance(o, torch.Tensor) else o for o in out[1:])


def take(x: Any, i: Any) -> Any:
    """``x[i]``; with ``i`` the while_loop's 0-d counter, ``index_select`` (a copy: the
    rewrite refuses writes through it)."""
    if not isinstance(i, torch.Tensor):
        return x[i]
    if not isinstance(x, torch.Tensor):
        raise TypeError(_not_a_tensor(x))
    return x.index_select(0, i.reshape(1).to(x.device)).squeeze(0)


def put(x: Any, i: Any, rest: tuple, value: Any) -> Any:
    """``x[i, *rest] = value``; returns ``x``. With ``i`` the while_loop's 0-d counter, the
    row is written on a copy and put back with ``index_copy`` (a new tensor, carried)."""
    if not isinstance(i, torch.Tensor):
        x[(i, *rest)] = value
        return x
    if not isinstance(x, torch.Tensor):
        raise TypeError(_not_a_tensor(x))
    at = i.reshape(1).to(x.device)
    row = x.index_select(0, at)
    row[(0, *rest)] = value
    return x.index_copy(0, at, row)


def _not_a_tensor(x: Any) -> str:
    return (f"{type(x).__name__} indexed by the loop variable of a loop that became a "
            f"torch.while_loop: only tensors can be (found {type(x).__name__}, expected a "
            "tensor); index a tensor, or keep the loop's count static")
