"""A builtin that folds a list, called on a tensor's ``tolist()``, is dispatched at run time::

    m = max(lengths.tolist())     ->    m = __stitch_rt__.listed("L4@f.py", "max", lengths)

``lengths.tolist()`` of a tensor whose length is known only at run time has no Python length
while traced: torch.export fixes it to the traced length (every other length then fails the
program's guard) and Dynamo breaks the graph. The fold needs no list: ``max``, ``min``,
``sum`` and ``len`` of a 1-D tensor of integers or bools are the tensor's own reduction,
read as a number (``rt_number_calls.listed``, which calls the builtin as written everywhere
else: eager, floats, other ranks). Only where the name is the builtin: one the function,
its closure or its module binds is left as written (decided here, from the source and the
module's globals: inside a cond's arm Dynamo compares a builtin with itself as two objects).
Calls with keywords (``max(xs, default=0)``, ``key=``) or more arguments are left as
written.
"""

from __future__ import annotations

import ast
import linecache

from capture import BreakKind, BreakSite

from ...plan import Action
from ..analysis.context import RewriteContext
from ..analysis.names import rt_call
from ..operators.rt_number_calls import FOLDS, LISTED
from .torch_names import bound_anywhere


def may_apply(site: BreakSite) -> bool:
    """A census site this pass may fix: a dynamic-shape break on a line that folds a
    ``.tolist()`` (read from the source, cheap)."""
    text = linecache.getline(site.filename, site.lineno)
    return site.kind is BreakKind.DYNAMIC_SHAPE and ".tolist()" in text \
        and any(f"{name}(" in text for name in FOLDS)


def listed_folds(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    shadowed = bound_anywhere(func) | set(ctx.freevars) | set(ctx.module_globals or ())
    _Folds(ctx, frozenset(FOLDS) - shadowed).visit(func)


class _Folds(ast.NodeTransformer):
    def __init__(self, ctx: RewriteContext, builtins: frozenset[str]) -> None:
        self.ctx, self.builtins = ctx, builtins

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        listed = node.args[0] if len(node.args) == 1 else None
        if not (isinstance(node.func, ast.Name) and node.func.id in self.builtins
                and not node.keywords and isinstance(listed, ast.Call)
                and isinstance(listed.func, ast.Attribute) and listed.func.attr == "tolist"
                and not listed.args and not listed.keywords):
            return node
        call = rt_call("listed", ast.Constant(self.ctx.label(node)),
                       ast.Constant(node.func.id), listed.func.value)
        if self.ctx.site_at(node) is not None:
            self.ctx.decide(Action.TENSOR_SCALAR, node, f"`{node.func.id}` {LISTED}")
        return ast.copy_location(call, node)
