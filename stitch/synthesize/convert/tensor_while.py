"""``while`` on a tensor condition becomes ``torch.while_loop``::

    while h.norm() > tol:                 def __stitch_wcond_1(h, steps):
        h = h * 0.5                           return __stitch_rt__.pred(h.norm() > tol)
        steps += 1                 ->     def __stitch_body_1(h, steps):
                                              h = h * 0.5
                                              steps += 1
                                              return (h, steps)
                                          (h, steps) = __stitch_rt__.while_true("S1",
                                              __stitch_wcond_1, __stitch_body_1, (h, steps))

Iterative refinement (run until a residual is small), decoding until a token, power
iteration: Dynamo breaks the graph on the condition every iteration, and torch.export
refuses it. Names bound before the loop that the body rebinds or writes in place (on its
own copy, as in a branch: ``branch_inplace``) are carried; everything else is read through
the closure. The condition is evaluated on the carried values, as eager does before each
iteration. In eager the runtime runs a plain Python loop. The carried values must keep
their shapes and dtypes from one iteration to the next (``while_loop``'s rule: otherwise
the trace fails and the site is refused). Refused at the rewrite, naming why: ``break`` /
``continue`` / ``return`` in the body, a ``while ... else``, effects in the body (nothing
to replay per iteration), writes to ``self`` attributes, names first bound in the body and
read after the loop, and a body that rebinds nothing the condition could see change.
"""

from __future__ import annotations

import ast
import copy

from ...plan import Action
from ..analysis.context import RewriteContext, RewriteRefused
from ..analysis.names import (
    bound_before,
    contains,
    function_def,
    located,
    name,
    rt_call,
    stored_names,
    tuple_of,
)
from ..analysis.truth import boolean
from .branch_inplace import in_place_as_assignment, write_back_statements
from .tensor_loop import refuse_effects_in_loop, refuse_escapes


def convert_tensor_while(node: ast.While, func: ast.FunctionDef,
                         ctx: RewriteContext) -> list[ast.stmt]:
    if node.orelse:
        raise RewriteRefused("the loop has an `else` clause")
    if ctx.is_size_test(node.lineno):  # bounded_while unrolls one a counter bounds
        raise RewriteRefused("a while on a test of sizes: unrolled only where a counter "
                             "bounds it (`k = 0` before the loop, `k < K` in its test)")
    if contains(node.body, ast.Break, ast.Continue, ast.Return, ast.Yield, ast.YieldFrom):
        raise RewriteRefused("the body leaves the loop early (break/continue/return)")
    refuse_effects_in_loop(node, ctx)
    bound = bound_before(func, node)
    refuse_escapes(node, func)
    n = ctx.next_id()
    body = copy.deepcopy(node.body)  # the loop stays as written if this is refused
    carriers, attributes = in_place_as_assignment([body], bound, n, ctx.writers)
    if attributes:
        raise RewriteRefused(
            f"the body writes attributes of self in place ({', '.join(sorted(attributes))}): "
            "a while_loop body cannot change the module; keep the value in a local name "
            "and assign the attribute after the loop")
    carried = list(dict.fromkeys(
        [a for a in stored_names(node.body) if a in bound] + carriers))
    if not carried:
        raise RewriteRefused("the body rebinds nothing bound before the loop, so the "
                             "condition could never change")
    cond_fn = function_def(f"__stitch_wcond_{n}", carried,
                           [ast.Return(rt_call("pred", boolean(copy.deepcopy(node.test))))])
    body_fn = function_def(f"__stitch_body_{n}", carried,
                           body + [ast.Return(tuple_of(carried))])
    before, after = write_back_statements(carriers)
    call = rt_call("while_true", ast.Constant(ctx.label(node)), name(cond_fn.name),
                   name(body_fn.name), tuple_of(carried))
    ctx.decide(Action.WHILE_LOOP, node,
               f"a while on a tensor condition: torch.while_loop carrying {', '.join(carried)}")
    return [located(s, node) for s in (
        *before, cond_fn, body_fn, ast.Assign([tuple_of(carried, store=True)], call), *after)]
