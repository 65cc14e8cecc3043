"""The range of whole numbers an expression can give, read off its source: what a loop's
count computed from data can be at most (``range(1 + int(p.item() > 0.5))``: 1 or 2), so
that the loop can be unrolled to that bound. Only forms whose range Python's own rules fix
whatever the data: a comparison, ``not``, ``bool()`` and ``isinstance``-free ``int()`` of
those are 0 or 1; int constants are themselves; ``+ - *``, unary ``-``, ``min``/``max``,
``a if c else b`` and ``and``/``or`` of ranged operands combine their ranges; ``a % k`` of
a constant ``k`` is 0..k-1 whatever ``a`` is; ``t.any()``, ``t.all()``, ``torch.equal(a, b)``
and the builtins ``any(...)``, ``all(...)`` are truths, 0 or 1. Anything else
(a name, a read number, a call) has no range: None."""

from __future__ import annotations

import ast

Range = tuple[int, int]


def static_range(expr: ast.expr) -> Range | None:
    """(least, greatest) value ``expr`` can take as a Python int, or None."""
    if isinstance(expr, ast.Constant):
        value = expr.value
        return (int(value), int(value)) if isinstance(value, bool | int) else None
    if isinstance(expr, ast.Compare) or (isinstance(expr, ast.UnaryOp)
                                         and isinstance(expr.op, ast.Not)):
        return (0, 1)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and not expr.keywords:
        return _call(expr.func.id, expr.args)
    if isinstance(expr, ast.Call) and _truth_valued(expr):
        return (0, 1)  # ``(h > 2).any()``, ``torch.equal(a, b)``: a truth, 0 or 1 as a number
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub | ast.UAdd):
        inner = static_range(expr.operand)
        if inner is None:
            return None
        return inner if isinstance(expr.op, ast.UAdd) else (-inner[1], -inner[0])
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add | ast.Sub | ast.Mult):
        left, right = static_range(expr.left), static_range(expr.right)
        if left is None or right is None:
            return None
        if isinstance(expr.op, ast.Add):
            return (left[0] + right[0], left[1] + right[1])
        if isinstance(expr.op, ast.Sub):
            return (left[0] - right[1], left[1] - right[0])
        ends = [a * b for a in left for b in right]
        return (min(ends), max(ends))
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mod):
        # Python's ``a % k`` takes the divisor's sign: 0..k-1 for any int a (k > 0)
        divisor = static_range(expr.right)
        if divisor is None or divisor[0] != divisor[1] or divisor[0] == 0:
            return None
        k = divisor[0]
        return (0, k - 1) if k > 0 else (k + 1, 0)
    if isinstance(expr, ast.IfExp):
        return _union([static_range(expr.body), static_range(expr.orelse)])
    if isinstance(expr, ast.BoolOp):  # ``a and b`` gives one of its operands
        return _union([static_range(v) for v in expr.values])
    return None


def _truth_valued(call: ast.Call) -> bool:
    """``x.any()``, ``x.all()``, ``x.is_nonzero()`` (over the whole tensor), ``torch.any(x)``,
    ``torch.all(x)``, ``torch.equal(a, b)``, ``torch.allclose(a, b, ...)``: one truth."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return False
    on_torch = isinstance(func.value, ast.Name) and func.value.id == "torch"
    if on_torch and func.attr in ("equal", "allclose"):
        return True
    if call.keywords:
        return False
    if on_torch and func.attr in ("any", "all"):
        return len(call.args) == 1
    return func.attr in ("any", "all", "is_nonzero") and not call.args


def _call(name: str, args: list[ast.expr]) -> Range | None:
    if name in ("bool", "any", "all") and len(args) == 1:  # the builtins give a bool
        return (0, 1)
    if name == "int" and len(args) == 1:  # int() of a whole-number range is that range
        return static_range(args[0])
    if name in ("min", "max") and len(args) >= 2:
        ranges = [static_range(a) for a in args]
        if any(r is None for r in ranges):
            return None
        pick = min if name == "min" else max
        return (pick(r[0] for r in ranges), pick(r[1] for r in ranges))
    return None


def _union(ranges: list[Range | None]) -> Range | None:
    if any(r is None for r in ranges):
        return None
    return (min(r[0] for r in ranges), max(r[1] for r in ranges))
