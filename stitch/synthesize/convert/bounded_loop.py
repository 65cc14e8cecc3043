"""A loop over ``range(n)``, ``n`` a size known only at run time with a static bound, whose
body carries nothing from one iteration to the next (it writes its results in place by
index, and it may read Python numbers from tensors), becomes that many iterations, each a
data-dependent ``if`` (a ``torch.cond`` after ``branch_to_cond``)::

    for i in range(len(rois)):                 __stitch_count_1 = __stitch_rt__.length(rois)
        w = int(widths[i].item())        ->    for i in range(__stitch_rt__.unroll_count(
        out[i] = f(maps[i], w)                         __stitch_count_1, "file:line")):
                                                   if i < __stitch_count_1:
                                                       w = int(widths[i].item())
                                                       out[i] = f(maps[i], w)

Exact: the same iterations run, in the same order, each with the same Python ``i``; one
past the count runs the cond's empty side. ``unroll_count`` is the count itself wherever it
is a Python int (eager, a fixed size), and while exporting the count's upper bound from the
shape environment (``x[idx][:4]``: 4). A count with no static bound up to
``rt_unroll.UNROLL_LIMIT`` keeps the loop (the round is built again without this rewrite),
and ``indexed_loop`` makes it one ``torch.while_loop`` where its body indexes only by the loop
variable. Torchvision's Keypoint R-CNN ``heatmaps_to_keypoints`` is this loop (a bicubic
resize per box to a size read from the box), with a bound of 100: over the limit.
"""

from __future__ import annotations

import ast
import copy

from ...plan import Action
from ..analysis.context import RewriteContext, RewriteRefused
from ..analysis.names import is_rt_call, located, loop_refusal, name, rt_call, stored_names
from ..analysis.ranges import static_range
from ..analysis.truth import boolean
from .tensor_loop import refuse_effects_in_loop, refuse_escapes

# the decision's reason; a round holding one takes its census with scalar reads captured
UNROLLED = "loop over range(n), n a size known only at run time: unrolled"


def count_of(node: ast.For) -> ast.expr:
    """The stop of ``range(stop)``; ``len(t)`` of a tensor as its (symbolic) size."""
    stop = node.iter.args[0]
    if (isinstance(stop, ast.Call) and isinstance(stop.func, ast.Name) and stop.func.id == "len"
            and len(stop.args) == 1 and not stop.keywords):
        return rt_call("length", stop.args[0])
    return stop


def unroll_bounded(node: ast.For, func: ast.FunctionDef, ctx: RewriteContext,
                   carried: list[str] = ()) -> list[ast.stmt]:
    why = loop_refusal(node)
    if why:
        raise RewriteRefused(why)
    if node.target.id in stored_names(node.body):  # each arm re-states i < n with it
        raise RewriteRefused(f"the body rebinds the loop variable {node.target.id!r}")
    refuse_effects_in_loop(node, ctx, unrolled=True)  # each iteration's cond defers its calls
    refuse_escapes(node, func, node.target.id)
    n = ctx.next_id()
    count = f"__stitch_count_{n}"
    stop = count_of(node)
    bound = static_range(stop)  # a count computed from data: its range fixes the bound
    if ctx.is_size_test(node.lineno):  # a count from sizes: it follows them, no guard
        stop = _SizeInts().visit(copy.deepcopy(stop))
    keep_count = located(ast.Assign([name(count, True)], stop), node)
    # a plain comparison, so each arm re-states it on the count's own symbol (arm_facts):
    # ``widths[i]`` in the arm then needs no assertion that the count exceeds i
    test = ast.Compare(name(node.target.id), [ast.Lt()], [name(count)])
    if bound is not None and bound[0] >= 1:
        # the iterations below the count's least value always run: as written, no cond (a
        # name the first binds, ``extra = h.mean(0)`` after ``extra = None``, is then bound
        # on both sides of the later ones)
        test = rt_call("runs_first", name(node.target.id), ast.Constant(bound[0]), test)
    branch = located(ast.If(test=test, body=node.body, orelse=[]), node)
    where = ast.Constant(f"{ctx.filename}:{node.lineno}")
    limit = [ast.Constant(bound[1])] if bound is not None else []
    new_loop = ast.For(target=node.target,
                       iter=ast.Call(name("range"),
                                     [rt_call("unroll_count", name(count), where, *limit)], []),
                       body=[branch], orelse=[])
    ctx.dependent_lines.add(node.lineno)  # the new `if` carries the loop's line
    ctx.unrolled_names = ctx.unrolled_names | {node.target.id, count}
    ctx.unrolled_lines.update(range(node.body[0].lineno, (node.end_lineno or node.lineno) + 1))
    carries = (f"the names it rebinds ({', '.join(carried)}) are each cond's outputs, the "
               "next iteration's inputs" if carried else "the body carries nothing")
    ctx.decide(Action.COND, node,
               f"{UNROLLED} to n's static bound, each iteration a torch.cond on i < n (same "
               f"iterations, same order; it writes by index; "
               f"{carries}; its scalar reads stay numbers, symbolic in the arm, as "
               "torch.export reads them)")
    return [keep_count, located(new_loop, node)]


def is_unrolled(node: ast.AST) -> bool:
    """``node`` is a loop this rewrite made (``range(unroll_count(...))``): its count is
    static while traced, so a cond may hold it."""
    return (isinstance(node, ast.For) and isinstance(node.iter, ast.Call)
            and isinstance(node.iter.func, ast.Name) and node.iter.func.id == "range"
            and len(node.iter.args) == 1 and is_rt_call(node.iter.args[0], "unroll_count"))


_TESTS = ("logical_and", "logical_or", "logical_not", "compare_chain", "truth_of")


class _SizeInts(ast.NodeTransformer):
    """``int(test)`` in a count as ``size_int(test)``: a test on sizes stays symbolic."""

    def visit_Call(self, node: ast.Call) -> ast.expr:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "int" and len(node.args) == 1 \
                and not node.keywords:
            # ``int(a or b)``, ``int(not a)``, ``int(0 < a < b)``: each test a SymBool
            test = boolean(node.args[0], sizes=True)
            for call in ast.walk(test):
                if any(is_rt_call(call, op) for op in _TESTS):
                    call.keywords = [k for k in call.keywords if k.arg != "sizes"]
                    call.keywords.append(ast.keyword("sizes", ast.Constant("symbolic")))
            return ast.copy_location(rt_call("size_int", test), node)
        return node
