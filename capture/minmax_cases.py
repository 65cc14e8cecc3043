"""Tests on data-dependent sizes that hold by cases of their ``Min``/``Max``
(``lowering_guards``: decided so while stitch lowers).

Inductor asks plain questions of sizes while it picks layouts: its CPU ``bmm`` lowering
(``torch/_inductor/kernel/bmm.py``, torch 2.14.1) takes ``bool(strides[-2] >= sizes[-1])``.
Where a size is data-dependent (an unbacked ``u``, from ``.item()`` or ``nonzero()``) and the
stride is Inductor's own ``16*Max(1, u)``, torch's ShapeEnv cannot decide ``16*Max(1, u) >=
u`` from the symbols' ranges (it bounds each term alone) and raises
``GuardOnDataDependentSymNode``: the whole build fails (LED's global attention, where the
count of global tokens is read from the mask).

``decided_by_cases`` splits such a test on one ``Min``/``Max`` at a time: each argument in turn is the extreme one (``Max(1, u)`` is ``1`` where ``u <= 1`` and
``u`` where ``u >= 1``), the range that case puts on the symbol is taken, and the test with
that argument in place is evaluated by torch under the narrowed ranges (``arm_ranges``).
Where every feasible case gives the same truth, that truth is the answer; otherwise torch's
own error stands. The cases cover every value, so the answer is exact, never a guess; it is
what torch would answer had it ranges precise enough.
"""

from __future__ import annotations

import sympy

from .arm_ranges import bounds

_DEPTH = 3  # at most this many Min/Max split, nested (2**3 cases for binary ones)


def _classes():
    """sympy's Min/Max and torch's own (``torch.utils._sympy.functions``: not subclasses)."""
    from torch.utils._sympy.functions import Max, Min

    return (sympy.Min, sympy.Max, Min, Max), (sympy.Max, Max)


_EXTREMES, _MAXIMA = _classes()


def decided_by_cases(env, expr: sympy.Basic, ranges: dict | None = None,
                     depth: int = _DEPTH) -> sympy.Basic | None:
    """``expr``'s truth where every case of its Min/Max gives the same one (``ranges``: the
    symbols' ranges, the ShapeEnv's by default); None where a case stays undecided, or
    they differ."""
    if not isinstance(expr, sympy.Rel | sympy.Not | sympy.And | sympy.Or):
        return None
    extremes = sorted(expr.atoms(*_EXTREMES), key=sympy.default_sort_key)
    if not extremes or depth == 0:
        return None
    ranges = dict(env.var_to_range) if ranges is None else ranges
    extreme = extremes[0]
    truths = set()
    for chosen in extreme.args:
        narrowed = _case_ranges(ranges, extreme, chosen)
        if narrowed is None:
            return None  # a case whose range no single symbol carries: undecided
        if narrowed is False:
            continue  # no value takes this case
        case = expr.xreplace({extreme: chosen})
        truth = _evaluate(env, case, narrowed)
        if truth is None:
            truth = decided_by_cases(env, case, narrowed, depth - 1)
        if truth is None:
            return None
        truths.add(bool(truth))
    return sympy.true if truths == {True} else sympy.false if truths == {False} else None


def _case_ranges(ranges: dict, extreme, chosen) -> dict | bool | None:
    """The symbols' ranges where ``chosen`` is ``extreme``'s value: False where no value
    is, None where a condition of the case is not a range on one symbol."""
    from torch.utils._sympy.value_ranges import ValueRanges

    ranges = dict(ranges)
    is_max = isinstance(extreme, _MAXIMA)
    for other in extreme.args:
        if other is chosen:
            continue
        condition = sympy.GreaterThan(chosen, other) if is_max else \
            sympy.LessThan(chosen, other)
        if condition == sympy.true:
            continue
        if condition == sympy.false:
            return False
        narrowed = bounds(_symbol_left(condition))
        if not narrowed:
            return None
        for symbol, (low, high) in narrowed.items():
            if symbol not in ranges:
                return None
            old = ranges[symbol]
            low, high = sympy.Max(old.lower, low), sympy.Min(old.upper, high)
            if (low > high) == sympy.true:
                return False
            ranges[symbol] = ValueRanges(low, high)
    return ranges


def _symbol_left(condition: sympy.Rel) -> sympy.Basic:
    """``1 >= u`` as ``u <= 1``: the terms with symbols on the left, with a positive
    leading coefficient, a number on the right."""
    difference = sympy.expand(condition.lhs - condition.rhs)
    number, terms = difference.as_independent(*difference.free_symbols, as_Add=True)
    relation = condition.func(terms, -number)
    if terms.as_coeff_Mul()[0].is_negative:
        relation = relation.reversedsign
    return relation


def _evaluate(env, expr, ranges) -> sympy.Basic | None:
    try:
        decided = env._maybe_evaluate_static(expr, var_to_range=tuple(ranges.items()))
    except Exception:  # noqa: BLE001 - not decidable so: the case stays undecided
        return None
    return decided if decided is not None and decided.is_Boolean and \
        not decided.free_symbols else None
