"""A Python loop over the indices ``nonzero()`` selects becomes a loop over every index,
each iteration a data-dependent ``if`` (a ``torch.cond`` after ``branch_to_cond``)::

    hit = (counts > 0).nonzero()                 __stitch_nzmask_1 = counts > 0
    for e in hit:                        ->      for __stitch_nzi_1 in range(mask_length(...)):
        y = self[f"expert_{e[0]}"](x)                if is_set(__stitch_nzmask_1, __stitch_nzi_1):
        out.index_add_(0, idx, y)                        e = nonzero_row(__stitch_nzmask_1, i)
                                                         y = self[f"expert_{__stitch_nzi_1}"](x)
                                                         out.index_add_(0, idx, y)

Exact: the visited indices are the same, in the same (ascending) order, and each iteration
sees the same row (``tensor([i])``); ``e[0]`` / ``e[-1]`` / ``int(e)`` / ``e.item()`` become
the Python int ``i`` (same value; a module name or a Python index built from it stays static),
and ``seq[e]`` indexes a module list or a Python sequence with ``i`` (what ``operator.index``
of the row gives), a tensor with the row itself.
The work is the loop body's for the selected indices only: an unselected index runs the
cond's empty side, not the body (mixture-of-experts dispatch stays sparse).

Only a loop over a 1-D tensor's nonzero() (each row one index; checked at run time) whose
body has no ``break``/``continue``/``return`` and no ``else`` clause.
"""

from __future__ import annotations

import ast
import copy
import linecache

from capture import BreakKind, BreakSite

from ...plan import Action
from ..analysis.context import RewriteContext, RewriteRefused
from ..analysis.names import SCOPES, located, loop_refusal, name, rt_call, walk_local
from ..canonicalize.continue_guard import continues_as_else
from ..operators.rt_unroll import NO_STATIC_BOUND

KINDS = (BreakKind.DYNAMIC_SHAPE, BreakKind.UNSUPPORTED_CALL, BreakKind.LOOP)
NONZERO = ("nonzero", "argwhere")


def may_apply(site: BreakSite) -> bool:
    """A census site this pass may fix: a dynamic-shape or untraceable-call break on a line
    that calls nonzero()/argwhere() or iterates (read from the source, cheap)."""
    if site.kind not in KINDS:
        return False
    text = linecache.getline(site.filename, site.lineno)
    return any(f"{n}(" in text for n in NONZERO) or text.lstrip().startswith("for ")


def _call(expr: ast.expr, attr: str) -> ast.Call | None:
    if (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute)
            and expr.func.attr == attr):
        return expr
    return None


def _as_tuple(call: ast.Call) -> bool | None:
    """The ``as_tuple`` keyword's value (False when absent); None when not a constant."""
    for k in call.keywords:
        if k.arg != "as_tuple" or not isinstance(k.value, ast.Constant):
            return None
        return bool(k.value.value)
    return False


def _nonzero_call(expr: ast.expr) -> tuple[ast.expr, bool] | None:
    """``X`` and as_tuple of ``X.nonzero(...)`` / ``torch.nonzero(X, ...)`` / ``argwhere``;
    ``torch.where(X)`` (one argument) is ``nonzero(as_tuple=True)``."""
    if not isinstance(expr, ast.Call) or not isinstance(expr.func, ast.Attribute):
        return None
    attr, recv = expr.func.attr, expr.func.value
    torch_fn = isinstance(recv, ast.Name) and recv.id == "torch"
    if attr == "where" and torch_fn and len(expr.args) == 1 and not expr.keywords:
        return expr.args[0], True
    if attr not in NONZERO:
        return None
    flag = _as_tuple(expr)
    if flag is None:
        return None
    if torch_fn:
        return (expr.args[0], flag) if len(expr.args) == 1 else None
    return (recv, flag) if not expr.args else None


_FLATTEN = ("squeeze", "flatten", "view", "reshape")


def _nonzero_arg(expr: ast.expr) -> tuple[ast.expr, str] | None:
    """The tensor whose nonzero indices ``expr`` iterates, and what each element is:
    ``row`` (``tensor([i])``: rows of ``nonzero()``), ``scalar`` (``tensor(i)``: the index
    vector ``nonzero(as_tuple=True)[0]``, ``torch.where(X)[0]``, a flattened ``nonzero()``),
    ``int`` (``i``: that vector's ``.tolist()``) or ``list`` (``[i]``: ``nonzero().tolist()``)."""
    listed = _call(expr, "tolist")
    if listed is not None and not listed.args:
        inner = _nonzero_arg(listed.func.value)
        if inner is None:
            return None
        kind = {"row": "list", "scalar": "int"}.get(inner[1])
        return (inner[0], kind) if kind else None
    if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Constant) \
            and expr.slice.value == 0:
        found = _nonzero_call(expr.value)
        return (found[0], "scalar") if found and found[1] else None
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) \
            and expr.func.attr in _FLATTEN and not expr.keywords:
        found = _nonzero_call(expr.func.value)
        if found and not found[1] and _flattens(expr):
            return found[0], "scalar"
        return None
    found = _nonzero_call(expr)
    return (found[0], "row") if found and not found[1] else None


def _flattens(call: ast.Call) -> bool:
    """``.squeeze(-1)``/``.squeeze(1)``/``.flatten()``/``.view(-1)``/``.reshape(-1)`` of an
    (n, 1) index matrix: the index vector."""
    args = [a.value if isinstance(a, ast.Constant) else None for a in call.args]
    if isinstance(call.args[0] if call.args else None, ast.UnaryOp):
        operand = call.args[0].operand
        args = [-operand.value] if isinstance(operand, ast.Constant) else [None]
    return {"squeeze": args in ([-1], [1]), "flatten": args == [],
            "view": args == [-1], "reshape": args == [-1]}[call.func.attr]


def nonzero_loops(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    if any(s.kind in KINDS for s in ctx.sites.values()):
        func.body = _block(func.body, func, ctx)


def _block(stmts: list[ast.stmt], func, ctx) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for i, stmt in enumerate(stmts):
        if isinstance(stmt, SCOPES):
            out.append(stmt)
            continue
        for field_name in ("body", "orelse", "finalbody"):
            block = getattr(stmt, field_name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                setattr(stmt, field_name, _block(block, func, ctx))
        if isinstance(stmt, ast.For) and stmt.lineno in ctx.kept_loops:
            if NO_STATIC_BOUND not in ctx.kept_loops[stmt.lineno]:  # loop_to_while's
                ctx.decide(Action.LEFT, stmt, "loop over nonzero() not rewritten: "
                           + ctx.kept_loops[stmt.lineno])
        elif isinstance(stmt, ast.For):
            mask, binding = _mask_of(stmt, out)  # mask: (tensor expression, element kind)
            if mask is not None and _is_site(stmt, binding, ctx):
                try:
                    out = _convert(stmt, mask, binding, out, stmts[i + 1:], func, ctx)
                    continue
                except RewriteRefused as e:
                    ctx.decide(Action.LEFT, stmt, f"loop over nonzero() not rewritten: {e}")
        out.append(stmt)
    return out


def _mask_of(loop: ast.For, before: list[ast.stmt]):
    """(the tensor whose nonzero indices the loop iterates, the element kind) and the
    statement binding the iterated name (``hit = X.nonzero()`` earlier in the same block, or
    last in a ``with`` block there: ``with torch.no_grad(): hit = ...nonzero()``)."""
    direct = _nonzero_arg(loop.iter)
    if direct is not None:
        return direct, None
    if not isinstance(loop.iter, ast.Name):
        return None, None
    return _binding(loop.iter.id, before)


def _binding(name_: str, before: list[ast.stmt]):
    for stmt in reversed(before):
        stored = {n.id for n in walk_local([stmt])
                  if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        if name_ not in stored:
            continue
        if isinstance(stmt, ast.With):
            return _binding(name_, stmt.body)
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)):
            found = _nonzero_arg(stmt.value)
            return (found, stmt) if found is not None else (None, None)
        return None, None
    return None, None


def _holder(binding: ast.stmt, block: list[ast.stmt]) -> list[ast.stmt] | None:
    """The statement list holding ``binding``: ``block`` or a ``with`` body inside it."""
    for stmt in block:
        if stmt is binding:
            return block
        if isinstance(stmt, ast.With):
            found = _holder(binding, stmt.body)
            if found is not None:
                return found
    return None


def _is_site(loop: ast.For, binding: ast.stmt | None, ctx: RewriteContext) -> bool:
    lines = {loop.lineno} | ({binding.lineno} if binding is not None else set())
    return any(s.kind in KINDS and s.lineno in lines for s in ctx.sites.values())


ELEMENT = {  # what the loop variable is bound to, per element kind
    "row": lambda m, i: rt_call("nonzero_row", m, i),
    "scalar": lambda m, i: rt_call("nonzero_index", m, i),
    "int": lambda m, i: i,
    "list": lambda m, i: ast.List([i], ast.Load()),
}


def _convert(loop: ast.For, found, binding, out, rest, func, ctx) -> list[ast.stmt]:
    mask, kind = found
    loop.body = continues_as_else(loop.body)  # its body becomes a cond arm: no `continue`
    why = loop_refusal(loop)
    if why:
        raise RewriteRefused(why)
    n = ctx.next_id()
    mask_name, index = f"__stitch_nzmask_{n}", f"__stitch_nzi_{n}"
    row = loop.target.id
    body = [_IndexOfRow(row, index).visit(copy.deepcopy(s)) for s in loop.body]
    take = ast.Assign([name(row, True)], ELEMENT[kind](name(mask_name), name(index)))
    test = rt_call("is_set", name(mask_name), name(index))
    branch = located(ast.If(test=test, body=[take, *body], orelse=[]), loop)
    new_loop = ast.For(target=name(index, True),
                       iter=ast.Call(name("range"), [rt_call(
                           "mask_length", name(mask_name),
                           ast.Constant(f"{ctx.filename}:{loop.lineno}"))], []),
                       body=[branch], orelse=[])
    keep_mask = located(ast.Assign([name(mask_name, True)], mask), binding or loop)
    if binding is None:
        out = [*out, keep_mask]
    else:  # the mask as it is where the nonzero() ran (the binding may rebind its name)
        holder = _holder(binding, out)
        at = next(i for i, s in enumerate(holder) if s is binding)
        others = [s for s in out if s is not binding]
        used = _read_elsewhere(binding.targets[0].id, loop, others, rest)
        holder[at:at + 1] = [keep_mask, *([binding] if used else [])]
    ctx.dependent_lines.add(loop.lineno)  # the new `if` carries the loop's line
    at_site = binding if binding is not None and ctx.site_at(loop) is None else loop
    ctx.decide(Action.COND, at_site,
               "loop over nonzero(): every index of the 1-D mask, each iteration a torch.cond "
               "on whether it is selected (same indices, same order; the body runs only for "
               "selected ones)")
    return [*out, located(new_loop, loop)]


def _read_elsewhere(name_: str, loop: ast.For, before, rest) -> bool:
    nodes = [*before, *rest, *loop.body]
    return any(isinstance(n, ast.Name) and n.id == name_ and isinstance(n.ctx, ast.Load)
               for n in walk_local(nodes))


class _IndexOfRow(ast.NodeTransformer):
    """``e[0]``, ``e[-1]``, ``int(e)``, ``e.item()`` -> the loop's Python index."""

    def __init__(self, row: str, index: str):
        self.row, self.index = row, index

    def _is_row(self, node) -> bool:
        return isinstance(node, ast.Name) and node.id == self.row

    def visit_Subscript(self, node):
        self.generic_visit(node)
        if self._is_row(node.slice) and isinstance(node.ctx, ast.Load):
            # ``self.experts[e]``: a module list takes the Python index, a tensor the row
            return ast.copy_location(rt_call("by_row", node.value, name(self.row),
                                             name(self.index)), node)
        if (self._is_row(node.value) and isinstance(node.slice, ast.Constant)
                and node.slice.value in (0, -1) and isinstance(node.ctx, ast.Load)):
            return ast.copy_location(name(self.index), node)
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        if (isinstance(node.func, ast.Name) and node.func.id == "int" and len(node.args) == 1
                and self._is_row(node.args[0])) or (
                isinstance(node.func, ast.Attribute) and node.func.attr == "item"
                and self._is_row(node.func.value) and not node.args):
            return ast.copy_location(name(self.index), node)
        return node

    def visit_FunctionDef(self, node):
        return node

    visit_Lambda = visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef
