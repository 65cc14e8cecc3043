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
from capture.sites import torch_assert
from capture.source import assert_aliases

from ...plan import Action
from ..analysis.context import RewriteContext, RewriteRefused
from ..analysis.names import contains, name, rt_call, thunk
from ..analysis.truth import boolean
from ..operators.runtime import encode_message


def _message(expr: ast.expr | None) -> tuple[ast.expr, str]:
    if expr is None:
        return ast.Constant(""), "no message"
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return ast.Constant(encode_message(expr.value)), "original message"
    # a computed message (``"bad mask in " + self.name``, an f-string of shapes) is made
    # where the check is traced, from the values it reads then; one that formats a value
    # known only when the check fails (a tensor, a size from data) is its source text
    parts = [n for n in _read_values(expr)]
    return (rt_call("message", thunk(expr), thunk(ast.Tuple(parts, ast.Load())),
                    ast.Constant(ast.unparse(expr))),
            "computed message, made from the values it reads when traced; where it formats "
            "a value known only at run time, the message is its source text")


def _read_values(expr: ast.expr) -> list[ast.expr]:
    """The values a message expression reads: names, attributes, subscripts and calls at
    the top of their chains (what an f-string formats, what ``+`` joins)."""
    out: list[ast.expr] = []

    def visit(node: ast.AST) -> None:
        read = _read_of(node)
        if read is not None:
            visit(read)  # ``x.min().item()``: the tensor read; reading it would break
            return
        if isinstance(node, ast.Name | ast.Attribute | ast.Subscript | ast.Call):
            out.append(node)
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(expr)
    return out


def _read_of(node: ast.AST) -> ast.expr | None:
    """The tensor a scalar read reads (``t.item()``, ``t.tolist()``, ``float(t)``,
    ``int(t)``, ``bool(t)``), or None for anything else."""
    if not isinstance(node, ast.Call) or node.keywords:
        return None
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in ("item", "tolist") and not node.args:
        return func.value
    if isinstance(func, ast.Name) and func.id in ("float", "int", "bool") \
            and len(node.args) == 1:
        return node.args[0]
    return None


class _Checks(ast.NodeTransformer):
    def __init__(self, ctx: RewriteContext, lines: set[int]) -> None:
        self.ctx, self.lines = ctx, lines
        self.assert_names = assert_aliases(ctx.filename)  # what the module calls torch._assert
        self.caught = 0  # inside the body of a `try` with handlers: a raise may be caught

    def visit_FunctionDef(self, node):  # nested functions are not ours to rewrite
        if node.name.startswith("__stitch_body_"):  # a loop's body made a while_loop's:
            # every assert in it tests the loop's data (left to Dynamo, it raised a bare
            # RuntimeError where the model raises AssertionError)
            lines = self.lines
            self.lines = lines | {n.lineno for n in ast.walk(node)
                                  if isinstance(n, ast.Assert | ast.Expr)}
            node.body = self.block(node.body)
            self.lines = lines
        return node

    def block(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        """Each statement visited; one may become several."""
        out: list[ast.stmt] = []
        for stmt in stmts:
            new = self.visit(stmt)
            out.extend(new if isinstance(new, list) else [new])
        return out

    def visit_AsyncFunctionDef(self, node):
        return node

    visit_Lambda = visit_ClassDef = visit_AsyncFunctionDef

    def visit_Try(self, node: ast.Try) -> ast.AST:
        self.caught += bool(node.handlers)
        node.body = self.block(node.body)
        self.caught -= bool(node.handlers)
        for field_name in ("orelse", "finalbody"):
            setattr(node, field_name, self.block(getattr(node, field_name)))
        node.handlers = [self.visit(h) for h in node.handlers]
        return node

    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        if node.lineno not in self.lines:
            return node
        return self._left_or(node, lambda: self._assert(node))

    def visit_Expr(self, node: ast.Expr) -> ast.AST:
        # ``torch._assert(c, msg)``, by any name the module gives it, is ``assert c, msg``
        call = torch_assert(node, self.assert_names)
        if call is None or node.lineno not in self.lines:
            return node
        as_assert = ast.copy_location(ast.Assert(
            test=call.args[0], msg=call.args[1] if len(call.args) > 1 else None), node)
        return self._left_or(node, lambda: self._assert(as_assert))

    def visit_If(self, node: ast.If) -> ast.AST | list[ast.stmt]:
        self.generic_visit(node)
        if node.orelse or not node.body:
            return node
        raise_ = node.body[-1]
        if not isinstance(raise_, ast.Raise) or raise_.exc is None:
            return node
        if len(node.body) > 1:
            return self._effects_then_raise(node, raise_)
        if node.lineno not in self.lines:
            return node
        return self._left_or(node, lambda: self._raise(node, raise_))

    def _effects_then_raise(self, node: ast.If, raise_: ast.Raise) -> ast.AST | list:
        """``if <data>: warn(...); raise E(...)``: torch.cond cannot hold a raise. The test
        is taken once; an ``if`` on it keeps what comes before the raise (a cond, its
        effects replayed), and a runtime check raises after it::

            if torch.isnan(h).any():          __stitch_fails_1 = torch.isnan(h).any()
                warnings.warn("nan")     ->   if __stitch_fails_1:
                raise ValueError("bad")           warnings.warn("nan")
                                              if __stitch_fails_1: raise ValueError("bad")
                                              (the last a runtime check)
        """
        if node.lineno not in self.lines | self.ctx.dependent_lines or self.caught or contains(
                node.body[:-1], ast.Return, ast.Break, ast.Continue, ast.Raise, ast.Yield,
                ast.YieldFrom):
            return node
        flag = f"__stitch_fails_{self.ctx.next_id()}"
        # taken once, as a value: `not`/`and`/`or` of tensors stay tensors (Python's `not`
        # would read a tensor's truth where it is made)
        test = ast.copy_location(ast.Assign([name(flag, True)], self._test(node)), node)
        effects = ast.copy_location(ast.If(name(flag), node.body[:-1], []), node)
        effects.end_lineno = node.body[-2].end_lineno
        raising = ast.copy_location(ast.If(name(flag), [raise_], []), node)
        self.ctx.dependent_lines.add(node.lineno)
        return [test, effects, self._left_or(raising, lambda: self._raise(raising, raise_))]

    def _left_or(self, node: ast.stmt, rewrite) -> ast.AST:
        """The check, or the statement as written with why (its site is then left)."""
        try:
            if self.caught:
                raise RewriteRefused("it sits in a `try` block that may catch what it raises")
            return rewrite()
        except RewriteRefused as e:
            self.ctx.decide(Action.LEFT, node, f"not made a runtime check: {e}")
            return node

    def _test(self, node: ast.If | ast.Assert) -> ast.expr:
        """The test as a value (a test on sizes keeps its numbers predicates, no guard)."""
        return boolean(node.test, sizes=self.ctx.is_size_test(node.lineno))

    def _assert(self, node: ast.Assert) -> ast.stmt:
        message, how = _message(node.msg)
        call = rt_call("check", ast.Constant(self.ctx.label(node)), self._test(node),
                       message, ast.Name("AssertionError", ast.Load()))
        self.ctx.decide(Action.CHECK, node, f"assert -> runtime check ({how})")
        return _one_line(ast.Expr(call), node)

    def _raise(self, node: ast.If, raise_: ast.Raise) -> ast.stmt:
        if raise_.cause is not None:
            raise RewriteRefused("`raise ... from ...`: the check would lose the cause")
        exc = raise_.exc
        if isinstance(exc, ast.Call):
            if len(exc.args) > 1 or exc.keywords or any(
                    isinstance(a, ast.Starred) for a in exc.args):
                raise RewriteRefused("the raised exception takes more than one argument")
            exc_type, message = exc.func, exc.args[0] if exc.args else None
        else:
            exc_type, message = exc, None
        text, how = _message(message)
        ok = rt_call("logical_not", self._test(node))
        if self.ctx.is_size_test(node.lineno):  # the truth of a size, as ``_test`` keeps it
            ok.keywords = [ast.keyword("sizes", ast.Constant(True))]
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
    func.body = _Checks(ctx, lines).block(func.body)
