"""The functions a branch's arms become for ``rt.cond``: each starts by naming its operands
(``__stitch_ops__``, so ``fresh`` clones only their aliases) and returns its outputs through
``fresh``; a returning arm's every ``return v`` does so with the attributes the arms write,
and, with side effects, the log of the calls it made (``branch_effects``)."""

from __future__ import annotations

import ast

from ..analysis.names import function_def, name, rt_call, tuple_of
from .branch_effects import log_name, start_log

_OPS = "__stitch_ops__"  # the branch's operands, kept so fresh() clones only their aliases


def _ops_stmt(params) -> ast.stmt:
    return ast.Assign(targets=[ast.Name(_OPS, ast.Store())], value=tuple_of(list(params)))


def branch_fn(fn_name, params, body, outputs) -> ast.FunctionDef:
    ret = ast.Return(rt_call("fresh", tuple_of(outputs), ast.Name(_OPS, ast.Load())))
    return function_def(fn_name, params, [_ops_stmt(params), *(body or []), ret])


def returning_fn(fn_name, params, body, effects=False, n=0, carried=()) -> ast.FunctionDef:
    """A returning arm: each ``return v`` becomes ``return fresh((v, *carried), ops)``
    (``carried``: the localised attributes the arms write); with side effects,
    ``return (fresh(...), log)``: the effect calls this arm made before returning
    (``branch_effects``)."""

    class Wrap(ast.NodeTransformer):
        def visit_FunctionDef(self, node):
            return node

        visit_Lambda = visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

        def visit_Return(self, node):
            value = node.value or ast.Constant(None)
            out = rt_call("fresh", ast.Tuple([value, *(name(c) for c in carried)], ast.Load()),
                          ast.Name(_OPS, ast.Load()))
            if effects:
                out = ast.Tuple([out, name(log_name(n))], ast.Load())
            return ast.copy_location(ast.Return(out), node)

    return function_def(fn_name, params, [_ops_stmt(params),
                                          *(start_log(n) if effects else []),
                                          *(Wrap().visit(s) for s in body)])


