"""A Python list of numbers grown from tensors and made a tensor: a tensor throughout while
traced (``rt_number_lists``).

    cu_window_seqlens: list = [0]
    for grid_t, grid_h, grid_w in grid_thw.tolist():
        ...
        cu_seqlens_tmp = seqlens.cumsum(0) * unit + cu_window_seqlens[-1]
        cu_window_seqlens.extend(cu_seqlens_tmp.tolist())
    cu_window_seqlens = torch.tensor(cu_window_seqlens, dtype=torch.int32)

``.tolist()`` of a tensor whose length is known only at run time (the windows of an image of
a grid given as data) has no Python length while tracing: Dynamo and torch.export stop there.

Applied to a list name where a break site lies on a line that extends it by a ``.tolist()``
and every use of the name in the function is one of: its one binding to a list of number
constants (``[0]``, ``[]``), ``name.extend(<tensor>.tolist())`` and ``name.append(<value>)``
as statements, ``name[<constant>]``, ``len(name)``, and ``torch.tensor(name)`` with
``dtype=``/``device=`` at most, which ends the list's life (the name rebound by it, or never
read again). Any other use (passed to a call, returned, iterated, sliced, stored into) leaves
the list as written and the break a refusal at its line.
"""

from __future__ import annotations

import ast

from ...plan import Action
from ..analysis.context import RewriteContext
from ..analysis.names import SCOPES, rt_call, statement_blocks, walk_local
from ..operators.rt_number_lists import NUMBER_LIST


def number_lists(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    if not ctx.sites:
        return
    for list_name, binding in _candidates(func):
        extends = [n for n in walk_local(func.body) if _extends(n, list_name)]
        end = _end_of_life(func, list_name, binding)
        if end is None or not any(_on_site(n, ctx) for n in extends) \
                or not _only_list_uses(func, list_name, binding, end):
            continue
        uses = _Uses(list_name, binding, (binding.lineno, end.end_lineno or end.lineno))
        func.body = [uses.visit(stmt) for stmt in func.body]
        ast.fix_missing_locations(func)
        ctx.decide(Action.TENSOR_SCALAR, extends[0],
                   f"the list `{list_name}` {NUMBER_LIST} (torch.cat for extend/append, "
                   "read as written; the Python list in eager)")


def _end_of_life(func: ast.FunctionDef, list_name: str, binding: ast.stmt) -> ast.stmt | None:
    """``name = torch.tensor(name, ...)`` after the binding in its block: the list's end."""
    for block in statement_blocks(func.body):
        if binding in block:
            for stmt in block[block.index(binding) + 1:]:
                if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
                        and isinstance(stmt.targets[0], ast.Name) \
                        and stmt.targets[0].id == list_name and _to_tensor(stmt.value, list_name):
                    return stmt
    return None


def _candidates(func: ast.FunctionDef):
    for node in walk_local(func.body):
        target = value = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        if isinstance(target, ast.Name) and isinstance(value, ast.List) and all(
                isinstance(e, ast.Constant) and type(e.value) in (int, float)
                for e in value.elts):
            yield target.id, node


def _on_site(node: ast.AST, ctx: RewriteContext) -> bool:
    return any(node.lineno <= line <= (node.end_lineno or node.lineno) for line in ctx.sites)


def _extends(node: ast.AST, list_name: str) -> bool:
    """``name.extend(<expr>.tolist())`` as a statement."""
    if not (isinstance(node, ast.Expr) and _method_on(node.value, list_name, "extend")):
        return False
    (arg,) = node.value.args
    return (isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute)
            and arg.func.attr == "tolist" and not arg.args and not arg.keywords)


def _method_on(node: ast.AST, list_name: str, method: str) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == method and isinstance(node.func.value, ast.Name)
            and node.func.value.id == list_name and len(node.args) == 1
            and not node.keywords)


def _to_tensor(node: ast.AST, list_name: str) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "tensor" and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "torch" and len(node.args) == 1
            and isinstance(node.args[0], ast.Name) and node.args[0].id == list_name
            and all(k.arg in ("dtype", "device") for k in node.keywords))


def _only_list_uses(func: ast.FunctionDef, list_name: str, binding: ast.stmt,
                    end: ast.stmt) -> bool:
    """Between the binding and its end every occurrence of the name is a use the rewrite
    knows (see the module's docstring), none in a nested function. Before the binding the
    name is another value, after the end the tensor: both are left as they are."""
    first, last = binding.lineno, end.end_lineno or end.lineno
    allowed = {id(binding.targets[0] if isinstance(binding, ast.Assign) else binding.target),
               id(end.targets[0])}
    for node in walk_local(func.body):
        if not first <= getattr(node, "lineno", first) <= last:
            continue
        if isinstance(node, SCOPES) and any(
                isinstance(n, ast.Name) and n.id == list_name for n in ast.walk(node)):
            return False
        if isinstance(node, ast.Expr) and (_extends(node, list_name)
                                           or _method_on(node.value, list_name, "append")):
            allowed.add(id(node.value.func.value))
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
                and node.value.id == list_name and isinstance(node.ctx, ast.Load) \
                and _constant_index(node.slice):
            allowed.add(id(node.value))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "len" and len(node.args) == 1:
            allowed.add(id(node.args[0]))
        elif _to_tensor(node, list_name) and node is end.value:
            allowed.add(id(node.args[0]))
    uses = [n for n in walk_local(func.body) if isinstance(n, ast.Name) and n.id == list_name
            and first <= n.lineno <= last]
    return all(id(n) in allowed for n in uses)


def _constant_index(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) is int


class _Uses(ast.NodeTransformer):
    def __init__(self, list_name: str, binding: ast.stmt, lines: tuple[int, int]) -> None:
        self.list_name, self.binding, self.lines = list_name, binding, lines

    def _inside(self, node: ast.AST) -> bool:
        return self.lines[0] <= node.lineno <= self.lines[1]

    def visit_FunctionDef(self, node):  # another scope
        return node

    visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = visit_FunctionDef

    def visit_Expr(self, node: ast.Expr) -> ast.AST:
        for method, helper in (("extend", "numbers_extend"), ("append", "numbers_append")):
            if _method_on(node.value, self.list_name, method) and self._inside(node):
                arg = node.value.args[0]
                value = arg.func.value if method == "extend" else arg
                return ast.copy_location(ast.Assign(
                    targets=[ast.Name(self.list_name, ast.Store())],
                    value=rt_call(helper, ast.Name(self.list_name, ast.Load()), value)), node)
        return self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id == self.list_name \
                and isinstance(node.ctx, ast.Load) and self._inside(node):
            return ast.copy_location(rt_call("numbers_item", node.value, node.slice), node)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if _to_tensor(node, self.list_name) and self._inside(node):
            call = rt_call("numbers_tensor", node.args[0])
            call.keywords = node.keywords
            return ast.copy_location(call, node)
        return node

    def generic_visit(self, node):
        if node is self.binding:
            node.value = ast.copy_location(rt_call("numbers", node.value), node.value)
        return super().generic_visit(node)
