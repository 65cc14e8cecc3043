"""A ``while`` on data that also counts its iterations in a Python int, and whose body does
what a ``torch.while_loop`` cannot (calls to print, log, warn or append, writes to attributes
or items, containers bound in it), becomes a loop over a constant range with a data-dependent
``break``, which ``break_guard`` turns into a flag and conds::

    k = 0                                  k = 0
    while h.mean() > 0.5 and k < 3:        for __stitch_wi_1 in range(3):
        print(f"{h.mean().item():.2f}") ->     if not (h.mean() > 0.5 and k < 3):
        h = h - 0.5                                break
        k += 1                                 print(f"{h.mean().item():.2f}")
                                               h = h - 0.5
                                               k += 1

Exact: the counter starts at a value its source fixes (``analysis/ranges.py``), every
iteration adds at least a fixed step to it at the top level of the body (no ``continue``,
``break`` or ``return`` in the body can skip that), and the test is a conjunction holding
``k < K`` (or ``<=``, or ``K > k``) with ``K``'s range fixed by its source, so the model makes
at most B iterations, and the range gives B tests. The model's test after a B-th iteration
is false by the counter alone, so it is not made: a cond for it would be one no input takes
the other side of, which a forced run (verification) would still run as a B+1-th pass.
A call inside the test itself is then made once fewer there (verification compares the
calls where an example makes B passes). A ``torch.while_loop`` carries fixed-shape
values and cannot return a call per iteration; each iteration's cond can, and the epilogue
replays the calls of the iterations that ran. Other loops stay ``tensor_while``'s single
``torch.while_loop``. B is at most ``rt_unroll.UNROLL_LIMIT``.
"""

from __future__ import annotations

import ast
import math

from ...plan import Action
from ..analysis.context import RewriteContext
from ..analysis.names import contains, name, statement_blocks, stored_names, walk_local
from ..analysis.ranges import static_range
from ..operators.rt_unroll import UNROLL_LIMIT
from .branch_effects import bound_names, effect_calls

_BOUNDS = {ast.Lt: 0, ast.LtE: 1}  # K - start (+1 with <=) over the step
_FLIPPED = {ast.Gt: ast.Lt, ast.GtE: ast.LtE}  # ``K > k`` is ``k < K``


def bounded_whiles(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    lines = ctx.loop_lines()
    for block in list(statement_blocks(func.body)):
        for i, node in enumerate(block):
            # a test on sizes: its conds per iteration follow the size (no while_loop on it)
            if not (isinstance(node, ast.While) and node.lineno in lines and not node.orelse
                    and (beyond_while_loop(node.body, ctx) or ctx.is_size_test(node.lineno))):
                continue
            bound = trip_bound(node, block[:i])
            if bound is not None and bound <= UNROLL_LIMIT:
                block[i] = _unrolled(node, bound, ctx)


_CONTAINERS = (ast.List, ast.Tuple, ast.Dict, ast.Set, ast.ListComp, ast.DictComp,
               ast.SetComp)


def beyond_while_loop(body: list[ast.stmt], ctx: RewriteContext) -> bool:
    """What a ``torch.while_loop`` cannot do and a cond per iteration can: calls the epilogue
    replays per iteration, writes to objects (attributes, items: counters, dicts, state the
    epilogue sets), and containers bound in the body (a while_loop carries tensors and
    numbers only)."""
    if effect_calls(body, ctx.warn_names, bound_names(ctx.func), ctx.helpers):
        return True
    for node in walk_local(body):
        if isinstance(node, ast.Attribute | ast.Subscript) and isinstance(node.ctx, ast.Store):
            return True
        if isinstance(node, ast.Assign) and isinstance(node.value, _CONTAINERS):
            return True
    return False


def trip_bound(loop: ast.While, before: list[ast.stmt]) -> int | None:
    """The most iterations ``loop`` can make, from a counter its test bounds; None where no
    counter fixes one."""
    if contains(loop.body, ast.Continue, ast.Break, ast.Return):
        return None
    best = None
    for counter, op, limit in _bounds(loop.test):
        start, step = _start(counter, before), _step(counter, loop.body)
        if start is None or step is None:
            continue
        trips = max(0, math.ceil((limit - start + _BOUNDS[op]) / step))
        best = trips if best is None else min(best, trips)
    return best


_SWAPPED = {ast.Lt: ast.Gt, ast.LtE: ast.GtE, ast.Gt: ast.Lt, ast.GtE: ast.LtE}
_NEGATED = {ast.GtE: ast.Lt, ast.Gt: ast.LtE}  # ``not k >= K`` is ``k < K`` for an int k


def _bounds(test: ast.expr):
    """(counter, ``<`` or ``<=``, the greatest K) of each ``k < K`` the test requires, also
    spelled negated (``not (p or k >= K)``: the test of a ``while True:`` left by a break)."""
    negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
    if negated and isinstance(test.operand, ast.BoolOp) and isinstance(test.operand.op, ast.Or):
        parts = [ast.UnaryOp(ast.Not(), v) for v in test.operand.values]  # De Morgan
    elif isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        parts = test.values
    else:
        parts = [test]
    for part in parts:
        if isinstance(part, ast.BoolOp) and isinstance(part.op, ast.And) or part is not test \
                and isinstance(part, ast.UnaryOp) and isinstance(part.op, ast.Not) \
                and isinstance(part.operand, ast.BoolOp):
            yield from _bounds(part)
            continue
        flip = isinstance(part, ast.UnaryOp) and isinstance(part.op, ast.Not)
        compare = part.operand if flip else part
        if not (isinstance(compare, ast.Compare) and len(compare.ops) == 1):
            continue
        left, op, right = compare.left, type(compare.ops[0]), compare.comparators[0]
        if flip:  # the counter on the left, then the negation (exact: the counter is an int)
            if not isinstance(left, ast.Name) and op in _SWAPPED:
                left, op, right = right, _SWAPPED[op], left
            if op not in _NEGATED:
                continue
            op = _NEGATED[op]
        if op in _FLIPPED:
            left, op, right = right, _FLIPPED[op], left
        limit = static_range(right)
        if op in _BOUNDS and isinstance(left, ast.Name) and limit is not None:
            yield left.id, op, limit[1]


def _start(counter: str, before: list[ast.stmt]) -> int | None:
    """The least value the counter holds when the loop starts: its last binding before the
    loop in the same block, an assignment whose source fixes its range."""
    for stmt in reversed(before):
        if counter in stored_names([stmt]):
            value = bound_value(stmt, counter)
            start = None if value is None else static_range(value)
            return None if start is None else start[0]
    return None


def bound_value(stmt: ast.stmt, counter: str) -> ast.expr | None:
    """What ``counter = v``, ``counter: T = v`` or ``h, counter = a, v`` binds it to; None
    for other bindings."""
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) \
            and stmt.target.id == counter:
        return stmt.value
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
        return None
    target, value = stmt.targets[0], stmt.value
    if isinstance(target, ast.Name):
        return value
    if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) \
            and len(target.elts) == len(value.elts):
        return next((v for t, v in zip(target.elts, value.elts, strict=True)
                     if isinstance(t, ast.Name) and t.id == counter), None)
    return None


def _step(counter: str, body: list[ast.stmt]) -> int | None:
    """The least amount the body adds to the counter each iteration: one statement at its
    top level (``k += c`` or ``k = k + c``, ``c`` at least 1), the counter's only binding."""
    stores = [n for n in walk_local(body) if isinstance(n, ast.Name) and n.id == counter
              and isinstance(n.ctx, ast.Store | ast.Del)]
    if len(stores) != 1:
        return None
    for stmt in body:
        added = None
        if isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, ast.Add) and \
                isinstance(stmt.target, ast.Name) and stmt.target.id == counter:
            added = stmt.value
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
                isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id == counter and \
                isinstance(stmt.value, ast.BinOp) and isinstance(stmt.value.op, ast.Add) and \
                isinstance(stmt.value.left, ast.Name) and stmt.value.left.id == counter:
            added = stmt.value.right
        step = static_range(added) if added is not None else None
        if step is not None:
            return step[0] if step[0] >= 1 else None
    return None


def _unrolled(loop: ast.While, bound: int, ctx: RewriteContext) -> ast.For:
    stop = ast.If(test=ast.UnaryOp(ast.Not(), loop.test), body=[ast.Break()], orelse=[])
    ast.copy_location(stop, loop)
    stop.end_lineno = loop.test.end_lineno
    stop.body[0] = ast.copy_location(stop.body[0], loop)
    index = name(f"__stitch_wi_{ctx.next_id()}", True)
    new = ast.For(target=index, iter=ast.Call(name("range"), [ast.Constant(bound)], []),
                  body=[stop, *loop.body], orelse=[])
    ast.copy_location(new, loop)
    ctx.bounded_lines.add(loop.lineno)
    ctx.dependent_lines.add(loop.lineno)
    ctx.decide(Action.COND, loop,
               f"while on data with calls in its body, at most {bound} iterations by its "
               f"counter: {bound} tests, each iteration a torch.cond whose calls the "
               "epilogue replays when it ran (bounded_while)")
    return new
