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

from ..plan import Action
from .context import RewriteContext, RewriteRefused
from .names import SCOPES, contains, located, name, rt_call, walk_local

KINDS = (BreakKind.DYNAMIC_SHAPE, BreakKind.UNSUPPORTED_CALL, BreakKind.LOOP)
NONZERO = ("nonzero", "argwhere")


def may_apply(site: BreakSite) -> bool:
    """A census site this pass may fix: a dynamic-shape or untraceable-call break on a line
    that calls nonzero()/argwhere() or iterates (read from the source, cheap)."""
    if site.kind not in KINDS:
        return False
    text = linecache.getline(site.filename, site.lineno)
    return any(f"{n}(" in text for n in NONZERO) or text.lstrip().startswith("for ")


def _nonzero_arg(expr: ast.expr) -> ast.expr | None:
    """``X`` of ``X.nonzero()`` / ``torch.nonzero(X)`` / ``argwhere`` (as_tuple not set)."""
    if not isinstance(expr, ast.Call) or not isinstance(expr.func, ast.Attribute):
        return None
    if expr.func.attr not in NONZERO or any(k.arg != "as_tuple" or not (
            isinstance(k.value, ast.Constant) and k.value.value is False) for k in expr.keywords):
        return None
    if (isinstance(expr.func.value, ast.Name) and expr.func.value.id == "torch"):
        return expr.args[0] if len(expr.args) == 1 else None
    return expr.func.value if not expr.args else None


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
        if isinstance(stmt, ast.For):
            mask, binding = _mask_of(stmt, out)
            if mask is not None and _is_site(stmt, binding, ctx):
                try:
                    out = _convert(stmt, mask, binding, out, stmts[i + 1:], func, ctx)
                    continue
                except RewriteRefused as e:
                    ctx.decide(Action.LEFT, stmt, f"loop over nonzero() not rewritten: {e}")
        out.append(stmt)
    return out


def _mask_of(loop: ast.For, before: list[ast.stmt]):
    """The tensor whose nonzero() the loop iterates, and the statement binding the iterated
    name (``hit = X.nonzero()`` just before, in the same block), if any."""
    direct = _nonzero_arg(loop.iter)
    if direct is not None:
        return direct, None
    if not isinstance(loop.iter, ast.Name):
        return None, None
    for stmt in reversed(before):
        stored = {n.id for n in walk_local([stmt])
                  if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        if loop.iter.id in stored:
            if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name)):
                arg = _nonzero_arg(stmt.value)
                return (arg, stmt) if arg is not None else (None, None)
            return None, None
    return None, None


def _is_site(loop: ast.For, binding: ast.stmt | None, ctx: RewriteContext) -> bool:
    lines = {loop.lineno} | ({binding.lineno} if binding is not None else set())
    return any(s.kind in KINDS and s.lineno in lines for s in ctx.sites.values())


def _convert(loop: ast.For, mask: ast.expr, binding, out, rest, func, ctx) -> list[ast.stmt]:
    if loop.orelse:
        raise RewriteRefused("the loop has an `else` clause")
    if contains(loop.body, ast.Break, ast.Continue, ast.Return, ast.Yield, ast.YieldFrom):
        raise RewriteRefused("its body leaves the loop early (break/continue/return)")
    if not isinstance(loop.target, ast.Name):
        raise RewriteRefused("the loop unpacks each row into several names")
    n = ctx.next_id()
    mask_name, index = f"__stitch_nzmask_{n}", f"__stitch_nzi_{n}"
    row = loop.target.id
    body = [_IndexOfRow(row, index).visit(copy.deepcopy(s)) for s in loop.body]
    take = ast.Assign([name(row, True)], rt_call("nonzero_row", name(mask_name), name(index)))
    test = rt_call("is_set", name(mask_name), name(index))
    branch = located(ast.If(test=test, body=[take, *body], orelse=[]), loop)
    new_loop = ast.For(target=name(index, True),
                       iter=ast.Call(name("range"), [rt_call("mask_length", name(mask_name))],
                                     []),
                       body=[branch], orelse=[])
    keep_mask = ast.Assign([name(mask_name, True)], mask)
    if binding is not None and not _read_elsewhere(binding.targets[0].id, loop, out, rest):
        out = [s for s in out if s is not binding]  # the nonzero() itself is not needed
    ctx.dependent_lines.add(loop.lineno)  # the new `if` carries the loop's line
    at_site = binding if binding is not None and ctx.site_at(loop) is None else loop
    ctx.decide(Action.COND, at_site,
               "loop over nonzero(): every index of the 1-D mask, each iteration a torch.cond "
               "on whether it is selected (same indices, same order; the body runs only for "
               "selected ones)")
    return [*out, located(keep_mask, loop), located(new_loop, loop)]


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
