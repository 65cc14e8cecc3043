"""Scalar reads stay 0-d tensors.

    peak = h.abs().max().item()        ->  peak = __stitch_rt__.scalar(h.abs().max())
    if float(t) > 0:                   ->  if __stitch_rt__.scalar(t, float) > 0:

``scalar`` returns the tensor (reshaped to 0-d) when given one and the Python number
otherwise, so the line behaves as before wherever the value was not a tensor.
"""

from __future__ import annotations

import ast

from capture import BreakKind

from ...plan import Action
from ..analysis.context import RewriteContext
from ..analysis.names import rt_call, walk_local

KINDS = (BreakKind.SCALAR_READ, BreakKind.BRANCH, BreakKind.ASSERT)
BUILTINS = {"int", "float", "bool"}


class ScalarsToTensors(ast.NodeTransformer):
    def __init__(self) -> None:
        self.changed = 0

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = node.func
        call = _as_function(node)
        compare = _comparison(call)
        if compare is not None:  # torch.equal / allclose: a Python bool from data
            self.changed += 1
            method = {"_method": ast.Constant(True)} if call is not node else {}
            return ast.copy_location(rt_call(compare, *call.args, **{
                k.arg: k.value for k in call.keywords if k.arg}, **method), node)
        if isinstance(func, ast.Attribute) and func.attr == "item" and not node.args:
            self.changed += 1
            return ast.copy_location(rt_call("scalar", func.value), node)
        if (isinstance(func, ast.Name) and func.id in ("min", "max") and len(node.args) >= 2
                and not node.keywords and not any(isinstance(a, ast.Starred)
                                                  for a in node.args)):
            # as Python picks (NaN, ties), not torch.minimum/maximum (not a read itself)
            return ast.copy_location(rt_call("extreme", func, *node.args), node)
        if (isinstance(func, ast.Name) and func.id in BUILTINS and len(node.args) == 1
                and not node.keywords):
            self.changed += 1
            return ast.copy_location(rt_call("scalar", node.args[0], ast.Name(func.id, ast.Load())),
                                     node)
        return node


_COMPARISONS = {"equal": "tensor_equal", "allclose": "tensor_allclose"}


def _comparison(node: ast.Call) -> str | None:
    """The run-time helper for ``torch.equal(a, b)`` / ``torch.allclose(a, b, ...)``,
    which return Python bools from data; the method forms ``a.equal(b)`` are turned into
    these by ``_as_function`` first."""
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in _COMPARISONS \
            and isinstance(func.value, ast.Name) and func.value.id == "torch" \
            and len(node.args) >= 2 and all(k.arg is not None for k in node.keywords):
        return _COMPARISONS[func.attr]
    return None


def _as_function(node: ast.Call) -> ast.Call:
    """``a.equal(b)`` / ``a.allclose(b, ...)`` -> ``torch.equal(a, b)`` / ``torch.allclose``
    (the runtime helpers, told it was a method, call it as written on non-tensors)."""
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in _COMPARISONS and len(node.args) >= 1 \
            and not (isinstance(func.value, ast.Name) and func.value.id == "torch"):
        return ast.Call(func=ast.Attribute(ast.Name("torch", ast.Load()), func.attr,
                                           ast.Load()),
                        args=[func.value, *node.args], keywords=node.keywords)
    return node


def header_exprs(stmt: ast.stmt) -> list[str]:
    """Fields of a statement that hold its header expressions (not its body)."""
    if isinstance(stmt, ast.If | ast.While | ast.Assert):
        return ["test"]
    if isinstance(stmt, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Return | ast.Expr):
        return ["value"]
    return []


def scalar_reads_to_tensors(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    lines = (ctx.lines_of_kind(*KINDS) | ctx.dependent_lines | ctx.arm_scalar_lines) \
        - ctx.unrolled_lines
    for stmt in list(walk_local(func.body)):
        if not isinstance(stmt, ast.stmt) or stmt.lineno not in lines:
            continue
        for field_name in header_exprs(stmt):
            value = getattr(stmt, field_name, None)
            if value is None:
                continue
            transformer = ScalarsToTensors()
            setattr(stmt, field_name, transformer.visit(value))
            if transformer.changed and ctx.site_at(stmt) is not None \
                    and ctx.site_at(stmt).kind == BreakKind.SCALAR_READ:
                ctx.decide(Action.TENSOR_SCALAR, stmt,
                           f"{transformer.changed} scalar read(s) kept as 0-d tensor(s)")
