"""Ranges that the size tests of enclosing cond arms put on a ShapeEnv's symbols, and what
an expression evaluates to under them (``branch_asserts``: a guard torch cannot decide
outside an arm may be decided inside it; ``verify/forced``: a side no input can run).

``bounds(u > 3)`` is ``{u: (4, oo)}``; ``decided_in_arm(env, Ne(u, 0), [u > 0])`` is true.
Only ranges on single symbols (or positive multiples of one, or a Min/Max of such with
constants) are read; anything else narrows nothing and leaves the expression undecided.
"""

from __future__ import annotations

import sympy


def bounds(condition: sympy.Basic) -> dict:
    """Ranges a condition puts on single symbols: ``u > c``, ``u >= c``, ``u < c``,
    ``u <= c``, ``Ne(u, c)`` at an end of u's range, ``Eq(u, c)``, for ``u`` a symbol, a
    positive multiple of one, or a ``Min`` (bounded below) / ``Max`` (bounded above) of such;
    ``And`` of conditions. Anything else puts none."""
    if isinstance(condition, sympy.And):
        out: dict = {}
        for part in condition.args:
            for symbol, (low, high) in bounds(part).items():
                old = out.get(symbol, (-sympy.oo, sympy.oo))
                out[symbol] = (sympy.Max(old[0], low), sympy.Min(old[1], high))
        return out
    if not isinstance(condition, sympy.Rel) or not condition.rhs.is_number:
        flipped = getattr(condition, "reversed", None)
        if isinstance(condition, sympy.Rel) and condition.lhs.is_number and flipped is not None:
            return bounds(flipped)
        return {}
    lhs, c = condition.lhs, condition.rhs
    if isinstance(condition, sympy.Eq):
        low, high = c, c
    elif isinstance(condition, sympy.StrictGreaterThan):
        low, high = sympy.floor(c) + 1, sympy.oo
    elif isinstance(condition, sympy.GreaterThan):
        low, high = sympy.ceiling(c), sympy.oo
    elif isinstance(condition, sympy.StrictLessThan):
        low, high = -sympy.oo, sympy.ceiling(c) - 1
    elif isinstance(condition, sympy.LessThan):
        low, high = -sympy.oo, sympy.floor(c)
    else:
        return {}
    terms = [(lhs, low, high)]
    if isinstance(lhs, sympy.Min | sympy.Max):
        # every argument of a Min is at least its low end (of a Max, at most its high end);
        # the one argument that is not a constant beyond the other end meets that end too
        is_min = isinstance(lhs, sympy.Min)
        free = [a for a in lhs.args if not a.is_number]
        beyond = all(c > high if is_min else c < low for c in lhs.args if c.is_number)
        terms = [(a, low if is_min or (beyond and len(free) == 1) else -sympy.oo,
                  high if not is_min or (beyond and len(free) == 1) else sympy.oo)
                 for a in free]
    out = {}
    for term, t_low, t_high in terms:
        coeff, symbol = term.as_coeff_Mul()
        if isinstance(symbol, sympy.Symbol) and coeff.is_positive and (
                t_low.is_finite or t_high.is_finite):
            out[symbol] = (sympy.ceiling(t_low / coeff) if t_low.is_finite else t_low,
                           sympy.floor(t_high / coeff) if t_high.is_finite else t_high)
    return out


def decided_in_arm(env, expr: sympy.Basic, conditions: list) -> sympy.Basic | None:
    """``expr`` evaluated with the ranges the enclosing arms' conditions give (scoped to
    this evaluation: the ShapeEnv keeps no trace of them), or None where still unknown."""
    from torch.utils._sympy.value_ranges import ValueRanges

    ranges = dict(env.var_to_range)
    narrowed = False
    for condition in conditions:
        for symbol, (low, high) in bounds(condition).items():
            if symbol not in ranges:
                continue
            old = ranges[symbol]
            low, high = sympy.Max(old.lower, low), sympy.Min(old.upper, high)
            if low.is_number and high.is_number and low <= high:
                ranges[symbol] = ValueRanges(low, high)
                narrowed = True
    if not narrowed:
        return None
    try:
        decided = env._maybe_evaluate_static(expr, var_to_range=tuple(ranges.items()))
    except Exception:  # noqa: BLE001 - not decidable so: torch's own error stands
        return None
    return decided if decided is not None and decided.is_Boolean and not decided.free_symbols \
        else None
