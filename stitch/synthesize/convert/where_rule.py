"""The cost rule that picks ``torch.where`` over ``torch.cond`` (data, then one function):
both arms cheap, pure, elementwise, assigning the same names::

    if p: h = h * 2        ->    h = torch.where(p, h * 2, h - 1)
    else: h = h - 1
"""

from __future__ import annotations

import ast
import copy

from ..analysis.names import is_rt_call, stored_names, walk_local
from ..analysis.truth import may_raise
from .number_reads import BINARY, COMPARE, UNARY

WHERE_MAX_NODES = 40
PURE_CALLS = frozenset({
    "abs", "exp", "log", "sqrt", "rsqrt", "relu", "sigmoid", "tanh", "sin", "cos", "neg",
    "clamp", "clamp_min", "clamp_max", "where", "maximum", "minimum", "pow", "square", "sign",
    "gelu", "silu", "softplus", "mul", "add", "sub", "div", "float", "half", "to",
    # operators on scalar reads (number_ops.py): elementwise; those that may raise are
    # found by may_raise above
    "number_op", "number_iop", "number_unary", "number_compare", "number_call",
})
_SYMBOLS = {**{v: k for k, v in BINARY.items()}, **{"u" + v: k for k, v in UNARY.items()},
            **{"c" + v: k for k, v in COMPARE.items()}}


class _AsWritten(ast.NodeTransformer):
    """``number_op("*", a, b)`` back to ``a * b``, ``number_call(abs, k)`` to ``abs(k)``
    (its size as the model wrote it)."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if is_rt_call(node, "number_op", "number_iop") and len(node.args) >= 3:
            return ast.BinOp(node.args[1], _SYMBOLS[node.args[0].value](), node.args[2])
        if is_rt_call(node, "number_unary") and len(node.args) >= 2:
            return ast.UnaryOp(_SYMBOLS["u" + node.args[0].value](), node.args[1])
        if is_rt_call(node, "number_compare") and len(node.args) >= 3:
            return ast.Compare(node.args[1], [_SYMBOLS["c" + node.args[0].value]()],
                               [node.args[2]])
        if is_rt_call(node, "number_call") and len(node.args) >= 2:
            return ast.Call(node.args[1], node.args[2:], [])
        return node


def _operators_as_written(stmts: list[ast.stmt]) -> list[ast.stmt]:
    return [_AsWritten().visit(copy.deepcopy(s)) for s in stmts]


def predication_mode(node: ast.If, assigned: list[str]) -> tuple[str, str]:
    """The cost rule: ``torch.where`` only for cheap, pure, elementwise, same-target arms."""
    arms = (node.body, node.orelse)
    if not node.orelse:
        return "cond", "torch.cond: no else branch"
    for arm in arms:
        if not all(isinstance(s, ast.Assign) and len(s.targets) == 1
                   and isinstance(s.targets[0], ast.Name) for s in arm):
            return "cond", "torch.cond: a branch does more than assign names"
    if set(stored_names(node.body)) != set(stored_names(node.orelse)):
        return "cond", "torch.cond: branches assign different names"
    size = sum(1 for _ in walk_local(_operators_as_written(node.body + node.orelse)))
    if size > WHERE_MAX_NODES:
        return "cond", f"torch.cond: branches too large for predication ({size} > {WHERE_MAX_NODES} nodes)"
    # torch.where computes both arms: one that can raise on the input the test rules out
    # (``x[i]`` past the end where the test checks ``i < 3``, ``x // d`` at d=0) would
    # raise where the model takes the other arm
    if any(may_raise(s) for s in node.body + node.orelse):
        return "cond", ("torch.cond: an arm may raise where the test rules it out (a computed "
                        "index, integer // or %, a division with a rounding mode)")
    for call in (c for c in walk_local(node.body + node.orelse) if isinstance(c, ast.Call)):
        func = call.func
        callee = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if callee not in PURE_CALLS:
            return "cond", f"torch.cond: `{callee}` is not a known pure elementwise call"
    return "where", (f"torch.where: both arms cheap, pure, elementwise ({size} nodes <= "
                     f"{WHERE_MAX_NODES}); falls back to cond if shapes differ at trace time")
