"""A branch torch.cond cannot take, specialised to the side example 0 took, with a runtime
check refusing the other (only with ``Settings(allow_guards=True)``)::

    if p:                    __stitch_rt__.guard("S1", p, True, "stitch specialised ...")
        h = f(h)      ->     h = f(h)
"""

from __future__ import annotations

import ast

from ...plan import Action
from ..analysis.context import RewriteContext
from ..analysis.names import located, rt_call
from ..analysis.truth import boolean
from ..operators.runtime import encode_message


def guard_branch(node: ast.If, ctx: RewriteContext, why: str) -> list[ast.stmt]:
    """Keep only the arm example 0 took; a runtime check refuses inputs taking the other."""
    side = ctx.sides[node.lineno]
    arm = node.body if side else (node.orelse or [ast.Pass()])
    source = ast.unparse(node.test)
    message = (f"stitch specialised `if {source}` ({ctx.filename}:{node.lineno}) to its "
               f"{'true' if side else 'false'} branch because {why}; this input takes the other "
               "branch. Export with an example that takes it, or run the model eagerly.")
    check = ast.Expr(rt_call("guard", ast.Constant(ctx.label(node)), boolean(node.test),
                             ast.Constant(side), ast.Constant(encode_message(message))))
    ctx.decide(Action.GUARD, node, f"specialised to the {'true' if side else 'false'} branch "
               f"(the one example 0 takes) with a runtime check; {why}")
    return [located(check, node), *arm]
