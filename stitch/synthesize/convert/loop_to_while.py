"""Loops counted by a tensor become ``torch.while_loop`` (loops over a tensor's rows:
``tensor_loop``; ``while`` on a tensor condition: ``tensor_while``).

    for i in range(int(n.item())):       def __stitch_body_1(i, h):
        h = self.a(h)              ->        h = self.a(h)
                                             return (h,)
                                         (h,) = __stitch_rt__.while_range("S1",
                                             __stitch_rt__.trip_count(n), __stitch_body_1, (h,))

Names the body assigns that were bound before the loop are carried; everything else is read
through the closure. A body that carries nothing (its results written by index) is unrolled
to the count's static bound instead (``bounded_loop``), or over the limit one while_loop
indexing by its counter (``indexed_loop``). ``break``/``continue``/``return`` in the body, ``for ... else``, and
``range`` with a start or step are left alone and reported.
"""

from __future__ import annotations

import ast

from ...plan import Action
from ..analysis.context import RewriteContext, RewriteRefused
from ..analysis.names import (
    bound_before,
    located,
    loop_refusal,
    name,
    reads_number,
    rt_call,
    stored_names,
    tuple_of,
    walk_local,
)
from ..analysis.ranges import static_range
from ..canonicalize.scalar_to_tensor import ScalarsToTensors
from ..operators.rt_unroll import NO_STATIC_BOUND, UNROLL_LIMIT
from .bounded_loop import unroll_bounded
from .bounded_while import beyond_while_loop, bound_value
from .branch_inplace import written_in_place
from .indexed_loop import indexed_while
from .tensor_loop import convert_tensor_loop, refuse_effects_in_loop, refuse_escapes
from .tensor_while import convert_tensor_while


def loops_to_while(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    lines = ctx.loop_lines()
    func.body = _rebuilt(func.body, lambda stmt, before: _census_loop(stmt, before, func,
                                                                       ctx, lines))


def _rebuilt(stmts: list[ast.stmt], convert) -> list[ast.stmt]:
    """``stmts`` with each statement (inner blocks first; nested functions and classes left
    alone) replaced by ``convert(stmt, the statements before it)``."""
    out: list[ast.stmt] = []
    for stmt in stmts:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.append(stmt)
            continue
        for field_name in ("body", "orelse", "finalbody"):
            block = getattr(stmt, field_name, None)
            if block:
                setattr(stmt, field_name, _rebuilt(block, convert))
        out.extend(convert(stmt, out))
    return out


def _census_loop(stmt: ast.stmt, before: list[ast.stmt], func, ctx, lines) -> list[ast.stmt]:
    if isinstance(stmt, ast.For) and _over_range(stmt) and stmt.lineno in ctx.kept_loops:
        # an unrolled loop that could not run so (rt_unroll.NoStaticBound): one
        # while_loop indexing by its counter, where the body allows it
        return _indexed_or_left(stmt, func, ctx)
    if isinstance(stmt, ast.For | ast.While) and stmt.lineno in lines \
            and not (isinstance(stmt, ast.For) and over_mask(stmt)):
        try:
            return (_convert(stmt, func, ctx, before) if isinstance(stmt, ast.For)
                    else convert_tensor_while(stmt, func, ctx))
        except RewriteRefused as e:
            ctx.decide(Action.LEFT, stmt, f"loop not rewritten: {e}")
    return [stmt]


def row_loops(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    """Loops over what may be a tensor's rows around a data-dependent branch (no census
    loop site: as written, torch.export unrolls them to the traced number of rows, a guard
    on it): converted where the body allows (at run time a Python loop over anything but a
    tensor whose length is known only then), else left as written, as before. A pass of its
    own, after the passes that rewrite the branch's test and reads, which see the loop's
    body as the function's own code only before it is a function."""
    func.body = _rebuilt(func.body, lambda stmt, before: _row_loop(stmt, before, func, ctx))


def _row_loop(stmt: ast.stmt, before: list[ast.stmt], func, ctx) -> list[ast.stmt]:
    if isinstance(stmt, ast.For) and _over_rows(stmt) and _holds_branch(stmt, ctx):
        try:
            return _convert(stmt, func, ctx, before)
        except RewriteRefused:
            pass
    return [stmt]


def _over_rows(node: ast.For) -> bool:
    """``for v in x`` (a name) or ``for v in x.unbind(...)`` / ``torch.unbind(x, ...)``: what
    may be a tensor's rows (the runtime tells)."""
    it = node.iter
    return isinstance(it, ast.Name) or _unbind_call(it) is not None


def _unbind_call(it: ast.expr) -> tuple[ast.expr, list, list] | None:
    """(tensor, args, keywords) of ``x.unbind(...)`` or ``torch.unbind(x, ...)``."""
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
            and it.func.attr == "unbind"):
        return None
    owner = it.func.value
    if isinstance(owner, ast.Name) and owner.id == "torch":
        return (it.args[0], it.args[1:], it.keywords) if it.args else None
    return owner, it.args, it.keywords


def _holds_branch(node: ast.For, ctx: RewriteContext) -> bool:
    return any(isinstance(x, ast.If) and x.lineno in ctx.dependent_lines
               for x in walk_local(node.body))


def _indexed_or_left(stmt: ast.For, func, ctx) -> list[ast.stmt]:
    kept = ctx.kept_loops[stmt.lineno]
    if NO_STATIC_BOUND in kept and len(stmt.iter.args) == 1 and not stmt.iter.keywords:
        try:
            return indexed_while(stmt, func, ctx)
        except RewriteRefused as e:
            kept = f"{kept}; as one torch.while_loop: {e}"
    ctx.decide(Action.LEFT, stmt, "loop not rewritten: " + kept)
    return [stmt]


def _none_or_float_before(name: str, before: list[ast.stmt]) -> bool:
    """``name``'s last binding among ``before`` (the loop's block up to it) gives it ``None``
    or a float literal (``extra = None``, ``h, s = x, 1.0``, ``extra: Tensor | None = None``)."""
    for stmt in reversed(before):
        if name in stored_names([stmt]):
            value = bound_value(stmt, name)
            return isinstance(value, ast.Constant) and (
                value.value is None or isinstance(value.value, float))
    return False


def _over_range(node: ast.For) -> bool:
    it = node.iter
    return isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"


def over_mask(node: ast.For) -> bool:
    """A loop ``nonzero_loop`` made (a static count; its body holds the data-dependent if)."""
    return isinstance(node.target, ast.Name) and node.target.id.startswith("__stitch_nzi_")


def _convert(node: ast.For, func, ctx, before: list[ast.stmt]) -> list[ast.stmt]:
    it = node.iter
    if not _over_range(node):  # ``for v in <tensor>``: its rows, however many the data gives
        unbound = _unbind_call(it)
        if unbound is not None:  # ``x.unbind(0)``: iterating ``x`` (rt_map.rows)
            node.iter = ast.copy_location(
                rt_call("rows", unbound[0], *unbound[1], **{k.arg: k.value for k in unbound[2]
                                                           if k.arg}), it)
        return convert_tensor_loop(node, func, ctx)
    if len(it.args) != 1 or it.keywords:
        raise RewriteRefused("only `for v in range(stop)` is rewritten")
    why = loop_refusal(node)
    if why:
        raise RewriteRefused(why)
    # calls per iteration, writes to objects, containers: what a while_loop cannot carry.
    # Unrolled where the count is a size, or a number read from data whose source fixes its
    # bound (analysis/ranges.py); else calls are refused here, naming them
    effects = beyond_while_loop(node.body, ctx) and (
        static_range(it.args[0]) is not None or not reads_number(it.args[0])
        or ctx.is_size_test(node.lineno))  # ``range(1 + int(x.shape[0] > 3))``: sizes
    refuse_effects_in_loop(node, ctx, unrolled=effects)  # also nested
    refuse_escapes(node, func, node.target.id)  # i after it: the last count, or as before
    bound = bound_before(func, node)
    carried = [a for a in stored_names(node.body) if a in bound and a != node.target.id]
    written = set(written_in_place(node.body, ctx.writers)) & (bound - {node.target.id})
    # a name bound to None or a float before the loop (``extra = None``, ``s = 1.0``), set
    # in it: a while_loop carries tensors and numbers, its float read back from a tensor
    # (a scalar read, a break in the census); a cond per iteration carries None or a
    # tensor, and a Python number as the number it is
    count = static_range(it.args[0])
    optional = count is not None and count[1] <= UNROLL_LIMIT and any(
        _none_or_float_before(c, before) for c in carried)
    if not carried or written or effects or optional or ctx.is_size_test(node.lineno):
        # writes by index, or calls the epilogue replays
        # per iteration: each iteration a cond, to the count's bound (over it: indexed_loop's
        # while_loop, which refuses the calls); names it rebinds are then that cond's outputs
        return unroll_bounded(node, func, ctx, carried)
    stop = ScalarsToTensors().visit(it.args[0])  # in place: after unroll_bounded reads it
    n = ctx.next_id()
    args = ast.arguments(posonlyargs=[], args=[ast.arg(node.target.id)] + [ast.arg(c) for c in carried],
                         vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
    body_fn = ast.FunctionDef(name=f"__stitch_body_{n}", args=args,
                              body=node.body + [ast.Return(tuple_of(carried))],
                              decorator_list=[], returns=None, type_params=[])
    call = rt_call("while_range", ast.Constant(ctx.label(node)), rt_call("trip_count", stop),
                   name(body_fn.name), tuple_of(carried))
    assign = ast.Assign(targets=[tuple_of(carried, store=True)], value=call)
    ctx.decide(Action.WHILE_LOOP, node, f"carries {', '.join(carried)}")
    return [located(body_fn, node), located(assign, node)]
