"""``a and b``, ``a or b``, ``not a`` and chained comparisons used as values (not as an ``if``/``while`` test, which
``branch_to_cond`` and ``break_guard`` take), on the lines of break sites::

    n = 1 + int(h.sum() > 0 and h.max().item() < 3.0)
 -> n = 1 + int(__stitch_rt__.logical_and(lambda: h.sum() > 0, lambda: ...))

Python's ``and`` asks ``bool()`` of its first operand, which on a tensor is a read of data (a
break, or a guard while exporting). Where every operand is a truth value (a comparison,
``not``, ``bool()``, or such an ``and``/``or``), the expression's value is its truth, so the
tensor-aware operators give exactly what Python gives: a Python operand short-circuits as in
Python (the later thunks are not called), a tensor one combines with ``torch.logical_and``
(computed only where Python would compute it when a later operand may raise). An operand of
any other kind keeps the expression as written.
"""

from __future__ import annotations

import ast

from ..analysis.context import RewriteContext
from ..analysis.names import rt_call, statement_blocks, thunk
from ..analysis.truth import CHAIN_OPS, boolean, may_raise
from ..operators.rt_logical import SYMBOLIC

# statements whose ``value`` is evaluated as a value (an ``if`` test is not one)
_VALUED = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return, ast.Expr)


def bool_values(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    lines = set(ctx.sites) | ctx.dependent_lines
    for block in statement_blocks(func.body):
        for stmt in block:
            if stmt.lineno in lines and isinstance(stmt, _VALUED) and stmt.value is not None:
                # on a test of sizes torch.export decided (``padding = pad_b > 0 or pad_r >
                # 0``), the truth stays a SymBool: what reads it decides (an ``if`` on it is
                # then a size test of its own, a cond)
                sizes = "symbolic" if ctx.is_size_test(stmt.lineno) else False
                stmt.value = truth_values(stmt.value, sizes)


def truth_values(expr: ast.expr, sizes: bool | str = False) -> ast.expr:
    """``expr`` with each ``and``/``or``/``not``/chained comparison of truth values made the
    tensor-aware operator."""
    return _Values(sizes).visit(expr)


def _truth_valued(node: ast.expr) -> bool:
    if isinstance(node, ast.Compare):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
            node.func.id in ("bool", "any", "all") and len(node.args) == 1 and not node.keywords:
        return True  # (a shadowed ``any``: truth_of calls it as written)
    return isinstance(node, ast.BoolOp) and all(_truth_valued(v) for v in node.values)


class _Values(ast.NodeTransformer):
    def __init__(self, sizes: bool | str = False) -> None:
        self.sizes = sizes

    def visit_Lambda(self, node: ast.Lambda) -> ast.Lambda:
        return node  # a thunk of an operator already made: its own scope

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.expr:
        if all(_truth_valued(v) for v in node.values):
            return ast.copy_location(boolean(node, self.sizes), node)
        self.generic_visit(node)
        if self.sizes == SYMBOLIC and not any(map(may_raise, node.values[1:])):
            # ``padding = pad_b or pad_r`` on sizes: Python's value (an operand, not its
            # truth), selected symbolically where the operand deciding is a size
            call = rt_call("number_either", ast.Constant(
                "or" if isinstance(node.op, ast.Or) else "and"), *map(thunk, node.values))
            call.keywords = [ast.keyword("sizes", ast.Constant(True))]
            return ast.copy_location(call, node)
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.expr:
        if isinstance(node.op, ast.Not) and _truth_valued(node.operand):
            return ast.copy_location(boolean(node, self.sizes), node)
        return self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> ast.expr:
        # ``padding = any(p > 0 for p in pads)`` on sizes: its truth kept symbolic too;
        # ``int(any(t.max() > 2 for t in ts))`` on data: a 0-d tensor truth (``truth_of``)
        named = node.func.id if isinstance(node.func, ast.Name) and len(node.args) == 1 \
            and not node.keywords else None
        if named in ("any", "all"):
            made = boolean(node, self.sizes)
            if made is not node:
                return ast.copy_location(made, node)
        self.generic_visit(node)
        if self.sizes == SYMBOLIC and named == "bool":  # ``bool(pad_b or pad_r)``
            return ast.copy_location(rt_call("size_truth", node.func, node.args[0]), node)
        return node

    def visit_Compare(self, node: ast.Compare) -> ast.expr:
        # ``0 < v < 1``: Python's ``and`` of the comparisons, each operand made once
        if len(node.ops) > 1 and all(type(op) in CHAIN_OPS for op in node.ops):
            return ast.copy_location(boolean(node, self.sizes), node)
        return self.generic_visit(node)
