"""Conditional expressions on data-dependent lines become a cond over two thunks::

    y = a if t.sum() > 0 else b    ->    y = __stitch_rt__.cond("S3", pred(...),
                                              lambda: fresh((a,)), lambda: fresh((b,)), ())[0]

(or, for a line that must be specialised, ``guarded_value``; for a test on a size whose
general value is tried at every size, the value most sizes take: convert/one_arm.py).
"""

from __future__ import annotations

import ast

from ...plan import Action
from ..analysis.context import RewriteContext
from ..analysis.names import LocalTransformer, rt_call, thunk
from ..analysis.origins import note
from ..analysis.truth import boolean, general_side
from ..operators.runtime import encode_message
from .len_to_size import lengths_in_test

ONE_ARM = ("a test on an input's size torch.export decided for the examples: the value "
           "most sizes take is used at every size (no guard, no cond); kept only where "
           "verification finds it exact on both sides")


class _IfExps(LocalTransformer):
    """``a if t else b`` on a data-dependent line: cond over two thunks, or specialised. The
    arms branch_to_cond made hold the branch's own statements (their lines kept): their
    conditional expressions are rewritten too."""

    def __init__(self, ctx: RewriteContext, lines: set[int]) -> None:
        self.ctx, self.lines = ctx, lines
        self.guards: list[ast.stmt] = []

    def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
        self.generic_visit(node)
        if node.lineno not in self.lines:
            return node
        ctx = self.ctx
        label = ctx.label(node)
        if ctx.is_one_arm(node.lineno):  # the value most sizes take, at every size
            ctx.decide(Action.ONE_ARM, node, ONE_ARM)
            node.test = general_side(lengths_in_test(node.test, ctx.func))
            return node
        if node.lineno in ctx.force_guard or node.lineno in ctx.sides:
            side = ctx.sides.get(node.lineno, False)
            message = (f"stitch specialised `{ast.unparse(node)}` ({ctx.filename}:{node.lineno}) "
                       f"to its {'true' if side else 'false'} value; this input takes the other.")
            ctx.decide(Action.GUARD, node, f"conditional expression specialised to its "
                       f"{'true' if side else 'false'} value with a runtime check")
            return rt_call("guarded_value", ast.Constant(label), boolean(node.test),
                           ast.Constant(side), ast.Constant(encode_message(message)),
                           thunk(node.body if side else node.orelse))
        ctx.decide(Action.COND, node, "conditional expression -> torch.cond over two thunks")
        note(ctx.origins, label, node)
        sizes = ctx.is_size_test(node.lineno)  # a test on sizes: its truth, no guard
        test = rt_call("size_pred" if sizes else "pred", boolean(node.test, sizes=sizes))
        pick = rt_call("cond", ast.Constant(label), test,
                       thunk(rt_call("fresh", ast.Tuple([node.body], ast.Load()))),
                       thunk(rt_call("fresh", ast.Tuple([node.orelse], ast.Load()))),
                       ast.Tuple([], ast.Load()))
        return ast.Subscript(pick, ast.Constant(0), ast.Load())


def ifexps_to_cond(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    lines = {ln for ln, s in ctx.sites.items() if s.kind.value == "branch"} | ctx.dependent_lines
    transformer = _IfExps(ctx, lines)
    func.body = [transformer.visit(s) for s in func.body]
