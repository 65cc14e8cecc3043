"""``contiguous()`` in a function stitch converts goes through the runtime's ``contiguous``.

    x = x[:, :H, :W].contiguous()    ->  x = __stitch_rt__.contiguous(x[:, :H, :W])

Inside a branch that becomes a cond (a test on data, or on a size torch.export decided),
Dynamo traces the arm for torch.cond. On a tensor of symbolic strides it decides whether
``contiguous()`` has anything to do for the traced sizes and guards on them: a window
model's cut of its padding (``if padding: x = x[:, :H, :W].contiguous()``, timm's TinyViT)
is contiguous exactly where nothing was padded, so the program would serve one side of the
test only. The runtime's ``contiguous`` copies into the contiguous layout there (the same
values, no guard) and is the call as written everywhere else (operators/rt_slices.py).
TinyViT itself stays refused, on another size test (docs/sweep.md says which).

Every ``<value>.contiguous()`` of the function with no positional argument (a
``memory_format`` keyword is handed on) is rewritten; a method of that name on anything
but a tensor is called as written at run time.
"""

from __future__ import annotations

import ast

from ..analysis.context import RewriteContext
from ..analysis.names import LocalTransformer, rt_call


class _Contiguous(LocalTransformer):
    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if not (isinstance(node.func, ast.Attribute) and node.func.attr == "contiguous"
                and not node.args and all(k.arg == "memory_format" for k in node.keywords)):
            return node
        call = rt_call("contiguous", node.func.value,
                       **{k.arg: k.value for k in node.keywords})
        return ast.copy_location(call, node)


def contiguous_copies(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    func.body = [_Contiguous().visit(stmt) for stmt in func.body]
