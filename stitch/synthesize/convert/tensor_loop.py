"""Loops over the rows of a tensor whose length is only known at run time become
``torch.while_loop`` (torchvision's per-class NMS: ``for c in torch.unique(labels)``)::

    keep = torch.zeros_like(s, dtype=bool)      __stitch_orig_keep = keep
    for c in torch.unique(labels):              __stitch_seq_1 = torch.unique(labels)
        i = torch.where(labels == c)[0]   ->    def __stitch_body_1(c, keep):
        keep[i[nms(b[i], s[i])]] = True             keep = __stitch_rt__.own(keep)
                                                    i = torch.where(labels == c)[0]
                                                    keep[i[nms(b[i], s[i])]] = True
                                                    return (keep,)
                                                (keep,) = __stitch_rt__.while_over("S1",
                                                    __stitch_seq_1, __stitch_body_1, (keep,))
                                                keep = __stitch_rt__.write_into(
                                                    __stitch_orig_keep, keep)

The body runs once per row, in order, with the row as the loop variable: the same values as
eager. A name bound before the loop that the body rebinds, or writes in place (on its own
copy each iteration, as in a branch: ``branch_inplace``), is carried; what was written in
place is copied back into the original tensor after the loop, so aliases see it. At run time
a plain Python loop runs when the length is known (eager, a fixed size): only a length from
data becomes a ``while_loop``. The carried values must keep their shapes from one iteration
to the next (``while_loop``'s rule: otherwise the trace fails and the site is refused).
Refused at the rewrite: ``break``/``continue``/``return``, an ``else``, effects in the body,
writes to ``self`` attributes, a loop variable written in place or used itself as an index
(``x[v]``; numbers read from it, ``int(v)``, ``x[int(v)]``, are kept), and names the body
binds first that are read after the loop.
"""

from __future__ import annotations

import ast
import copy

from ...plan import Action
from ..analysis.context import RewriteContext, RewriteRefused
from ..analysis.names import (
    bound_before,
    function_def,
    located,
    loop_refusal,
    name,
    reads_after,
    rt_call,
    stored_names,
    tuple_of,
    walk_local,
)
from ..operators.rt_unroll import UNROLL_LIMIT
from .arm_list_reads import list_reads
from .branch_effects import bound_names, effect_calls
from .branch_inplace import in_place_as_assignment, write_back_statements
from .stacked_lists import rewrite_appends, rewrite_stacks, stacked_lists


def convert_tensor_loop(node: ast.For, func: ast.FunctionDef,
                        ctx: RewriteContext) -> list[ast.stmt]:
    unpacked = [n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)]
    node = _row_named(node)
    why = loop_refusal(node)
    if why:
        raise RewriteRefused(why)
    target = node.target.id
    n = ctx.next_id()
    body = copy.deepcopy(node.body)  # the loop stays as written if this is refused
    # lists grown by one item per row and stacked after: the loop's outputs, not effects
    stacks = stacked_lists(node, func)
    items = {lst: f"__stitch_item_{n}_{k}" for k, lst in enumerate(stacks)}
    rewrite_appends(body, items)
    probe = copy.copy(node)
    probe.body = body
    refuse_effects_in_loop(probe, ctx)
    refuse_escapes(node, func, target)
    for each in dict.fromkeys([target, *unpacked]):
        _refuse_python_reads(probe, each)
    bound = bound_before(func, node)
    carriers, attributes = in_place_as_assignment([body], bound - {target}, n, ctx.writers)
    if attributes:
        raise RewriteRefused(
            f"the body writes attributes of self in place ({', '.join(sorted(attributes))}): "
            "a while_loop body cannot change the module; keep the value in a local name "
            "and assign the attribute after the loop")
    if target in carriers:
        raise RewriteRefused(f"the body writes the loop variable {target!r} in place")
    carried = list(dict.fromkeys(
        [a for a in stored_names(node.body) if a in bound and a != target] + carriers))
    if not carried and not stacks:
        raise RewriteRefused("the body carries no value from one iteration to the next")
    if carried and stacks:
        raise RewriteRefused(
            f"the body both carries {', '.join(carried)} from one row to the next and grows "
            f"{', '.join(stacks)} by a row's item: torch.while_loop cannot grow a list and "
            "torch's map cannot carry a value. Compute the carried value before the loop "
            "(a cumulative op such as torch.cumsum), or grow the list in a loop of its own")
    seq = f"__stitch_seq_{n}"
    body_fn = function_def(f"__stitch_body_{n}", [target, *carried],
                           body + [ast.Return(tuple_of(carried + list(items.values())))])
    before, after = write_back_statements(carriers)
    call = rt_call("while_over", ast.Constant(ctx.label(node)), name(seq), name(body_fn.name),
                   tuple_of(carried), stacked=ast.Constant(len(stacks)))
    rewrite_stacks(stacks)
    ctx.decide(Action.WHILE_LOOP, node, "a loop over a tensor's rows where their number is "
               "known only at run time (a Python loop over anything else): " + (
        f"torch.while_loop carrying {', '.join(carried)}" if carried else
        f"torch's map over them, stacking {', '.join(stacks)}"))
    return [located(s, node) for s in (
        *before, ast.Assign([name(seq, True)], node.iter), body_fn,
        ast.Assign([tuple_of(carried + list(stacks), store=True)], call), *after)]


def _row_named(node: ast.For) -> ast.For:
    """``for a, (b, c) in rows:`` becomes ``for __stitch_row_L in rows: a, (b, c) =
    __stitch_row_L`` (in place, L the loop's line; the same Python, so a loop refused later
    stays correct as it is): the row is one name, unpacked where the body starts, as Python
    unpacks it each iteration."""
    if not isinstance(node.target, ast.Tuple | ast.List):
        return node
    row = f"__stitch_row_{node.lineno}"
    unpack = ast.copy_location(ast.Assign([node.target], ast.Name(row, ast.Load())),
                               node.target)
    node.target = ast.copy_location(ast.Name(row, ast.Store()), node.target)
    node.body = [ast.fix_missing_locations(unpack), *node.body]
    return node


def effects_in_loop(node: ast.For | ast.While, ctx: RewriteContext) -> list[ast.Call]:
    """The print/log/warn/append calls (and helpers making them) in a loop's body."""
    return effect_calls(node.body, ctx.warn_names, bound_names(ctx.func), ctx.helpers)


def refuse_effects_in_loop(node: ast.For, ctx: RewriteContext, unrolled: bool = False) -> None:
    """A loop that becomes a ``while_loop`` cannot defer a call per iteration (the loop
    rewrites share this refusal). ``unrolled``: each iteration becomes its own cond, whose
    calls the epilogue replays when that iteration ran; only the list reads are refused."""
    effects = [] if unrolled else effects_in_loop(node, ctx)
    if effects:
        lines = ", ".join(sorted({f"{ctx.filename}:{c.lineno}" for c in effects}))
        raise RewriteRefused(
            f"the body makes print/log/warn/append calls ({lines}): torch.while_loop "
            "carries fixed-shape values and cannot return one per iteration for the "
            "epilogue to replay. Move the call out of the loop (e.g. print a value the "
            "loop accumulates), bound its count (torch._check(n <= K) for a K up to "
            f"{UNROLL_LIMIT}: the loop is then unrolled and each iteration's calls "
            "replayed), or run the model eagerly")
    traced = [*node.body, *([node.test] if isinstance(node, ast.While) else [])]
    why = list_reads(traced, bound_names(ctx.func) or frozenset(), ctx.filename,
                     "loop body", "torch.while_loop")
    if why is not None:  # the body would read the list as traced (arm_list_reads.py)
        raise RewriteRefused(why)


def _refuse_python_reads(node: ast.For, target: str) -> None:
    """A row used itself as an index (``x[v]``, ``x[v[0], v[1]]``, a slice bound): Dynamo
    reads a traced 0-d tensor index as a number of its own inside the body, which a
    while_loop cannot keep on torch 2.14; refused, naming the line, instead of a trace that
    fails. A number read from the row (``int(v)``, ``v.item()``, ``x[int(v)]``,
    ``range(int(v))``) is kept: the row comes from ``index_select`` (``while_over``), and
    numbers read from it the body holds (measured on torch 2.14)."""
    def is_row(expr: ast.AST) -> bool:
        while isinstance(expr, ast.Subscript):
            expr = expr.value
        return isinstance(expr, ast.Name) and expr.id == target

    for n in walk_local(node.body):
        if not isinstance(n, ast.Subscript):
            continue
        parts = n.slice.elts if isinstance(n.slice, ast.Tuple) else [n.slice]
        for p in parts:
            bounds = [p.lower, p.upper, p.step] if isinstance(p, ast.Slice) else [p]
            if any(b is not None and is_row(b) for b in bounds):
                raise RewriteRefused(
                    f"the body indexes with the loop variable {target!r} itself (line "
                    f"{n.lineno}); a torch.while_loop body cannot hold the number Dynamo "
                    "reads from a tensor index on torch 2.14. Index with a number read "
                    f"from it (``x[int({target})]``) or a mask (``x[idx == {target}]``) to "
                    "make the loop one graph")


def refuse_escapes(node: ast.For | ast.While, func: ast.FunctionDef, target: str = "") -> None:
    """The loop variable and names first bound in the body stay inside the while_loop (and
    are unbound after a loop that ran no iteration): a read of one after the loop (Python
    leaves them bound) cannot be rewritten."""
    bound = bound_before(func, node)
    local = {a for a in stored_names(node.body) if a not in bound} | ({target} if target
                                                                        else set())
    after = reads_after(node, func, local)
    if after:
        names = ", ".join(sorted({n.id for n in after}))
        raise RewriteRefused(
            f"{names} bound in the loop is read after it (line {after[0].lineno}); a "
            "while_loop keeps only the values bound before the loop")
