"""Data-dependent asserts and ``if cond: raise`` become runtime checks in the graph.

    assert h.max() < 1e4, "overflow"   ->  __stitch_rt__.check("S3", h.max() < 1e4, "overflow",
                                                            AssertionError)
    if torch.isnan(h).any():           ->  __stitch_rt__.check("S4",
        raise ValueError("NaN")                  __stitch_rt__.logical_not(torch.isnan(h).any()),
                                                 "NaN", ValueError)

With a tensor condition ``check`` emits ``torch._assert_async`` (the message carries the site
and exception type, so the program re-raises the original type) or, on CUDA
(``Settings.checks``), returns the condition for the epilogue to raise on; with a Python
condition it raises exactly like the original statement.
"""

from __future__ import annotations

import ast

from capture import BreakKind

from ..plan import Action
from .context import RewriteContext, RewriteRefused
from .names import rt_call
from .runtime import encode_message


def _message(expr: ast.expr | None) -> tuple[ast.expr, str]:
    if expr is None:
        return ast.Constant(""), "no message"
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return ast.Constant(encode_message(expr.value)), "original message"
    # a computed message is evaluated where the check runs; tensor values in it would show
    # as traced values, so record the expression's source instead
    return (ast.Constant(encode_message(ast.unparse(expr))),
            "message is the source of a computed message")


class _Checks(ast.NodeTransformer):
    def __init__(self, ctx: RewriteContext, lines: set[int]) -> None:
        self.ctx, self.lines = ctx, lines

    def visit_FunctionDef(self, node):  # nested functions are not ours to rewrite
        return node

    visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = visit_FunctionDef

    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        if node.lineno not in self.lines:
            return node
        message, how = _message(node.msg)
        call = rt_call("check", ast.Constant(self.ctx.label(node)), node.test, message,
                       ast.Name("AssertionError", ast.Load()))
        self.ctx.decide(Action.CHECK, node, f"assert -> runtime check ({how})")
        return _one_line(ast.Expr(call), node)

    def visit_If(self, node: ast.If) -> ast.AST:
        self.generic_visit(node)
        if node.lineno not in self.lines or node.orelse or len(node.body) != 1:
            return node
        raise_ = node.body[0]
        if not isinstance(raise_, ast.Raise) or raise_.exc is None:
            return node
        exc = raise_.exc
        if isinstance(exc, ast.Call):
            if len(exc.args) > 1 or exc.keywords:
                raise RewriteRefused("the raised exception takes more than one argument")
            exc_type, message = exc.func, exc.args[0] if exc.args else None
        else:
            exc_type, message = exc, None
        text, how = _message(message)
        ok = rt_call("logical_not", node.test)
        call = rt_call("check", ast.Constant(self.ctx.label(node)), ok, text, exc_type)
        self.ctx.decide(Action.CHECK, node, f"if/raise -> runtime check ({how})")
        return _one_line(ast.Expr(call), node)


def _one_line(stmt: ast.stmt, like: ast.stmt) -> ast.stmt:
    """Place every node of a synthesized check on the first line of the statement it replaces.
    The check gathers parts of several lines (``if`` test, ``raise`` type, message); lines
    that go back and forth inside one call make Dynamo's resume functions report later
    breaks on the wrong line (torch 2.14), so that a print after the check is not found."""
    for node in ast.walk(stmt):
        if "lineno" in node._attributes:
            node.lineno = node.end_lineno = like.lineno
            node.col_offset, node.end_col_offset = like.col_offset, like.col_offset + 1
    return stmt


def asserts_to_checks(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    lines = ctx.lines_of_kind(BreakKind.ASSERT) | ctx.dependent_lines | ctx.arm_assert_lines
    func.body = [_Checks(ctx, lines).visit(s) for s in func.body]
