"""Tensors used as slice bounds become symbolic ints.

    tokens = x[start:end]        ->  tokens = x[__stitch_rt__.index(start):__stitch_rt__.index(end)]
    out[start:end] = y           ->  out[__stitch_rt__.index(start):__stitch_rt__.index(end)] = y
    torch.arange(0, end)         ->  torch.arange(0, __stitch_rt__.index(end))

Python slices a tensor with 0-d integer tensors by calling their ``__index__``: a scalar
read Dynamo breaks on ("Tensor.item() ... capture_scalar_outputs=False") at a line with no
read written on it (Aria 4.52's sequential expert GEMM, slicing the tokens of each expert
out of a cumulative count). torch.export cannot store into such a slice either: it guards
on the bound ("Could not extract specialized integer from data-dependent expression").
``index`` makes the read explicit — ``.item()``, an unbacked ``SymInt`` in the graph, what
``__index__`` gives in eager — and the census of the rewritten function captures scalar
reads, as torch.export does. Loads and stores then slice exactly as written.

Applied to every slice of a function that holds such an implicit read, and to the slices
in the body of a loop unrolled to its bound (``bounded_loop``: a cond arm each iteration,
which the census did not reach), nowhere else.
"""

from __future__ import annotations

import ast

from capture import BreakKind, BreakSite
from capture import torch_messages as tm

from ...plan import Action
from ..analysis.context import RewriteContext
from ..analysis.names import is_rt_call, rt_call, walk_local

# calls that read a tensor into Python where they are written
_EXPLICIT = {"item", "tolist", "int", "float", "bool"}


def implicit_read(site: BreakSite) -> bool:
    """A scalar read at a statement that writes none: a tensor read as an index."""
    if site.kind != BreakKind.SCALAR_READ or \
            not tm.matches(tm.SCALAR_READ_NOT_CAPTURED, site.gb_type + site.reason):
        return False
    try:
        tree = ast.parse(site.source_line.strip())
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else \
                node.func.id if isinstance(node.func, ast.Name) else ""
            if name in _EXPLICIT:
                return False
    return any(isinstance(n, ast.Slice) for n in ast.walk(tree))


class _Bounds(ast.NodeTransformer):
    def __init__(self) -> None:
        self.changed = 0

    def visit_Slice(self, node: ast.Slice) -> ast.AST:
        self.generic_visit(node)
        for field_name in ("lower", "upper", "step"):
            bound = getattr(node, field_name)
            if bound is None or isinstance(bound, ast.Constant) or is_rt_call(bound, "index"):
                continue
            setattr(node, field_name, ast.copy_location(rt_call("index", bound), bound))
            self.changed += 1
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        """``torch.arange(0, col - prev)``: its bounds too are read through ``__index__``."""
        self.generic_visit(node)
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr == "arange" and isinstance(f.value, ast.Name) \
                and f.value.id == "torch":
            for i, arg in enumerate(node.args):
                if not isinstance(arg, ast.Constant | ast.Starred) and not is_rt_call(arg, "index"):
                    node.args[i] = ast.copy_location(rt_call("index", arg), arg)
                    self.changed += 1
        return node


def _bounded(node: ast.expr) -> bool:
    return any(isinstance(n, ast.Slice) and any(
        b is not None and not isinstance(b, ast.Constant) for b in (n.lower, n.upper, n.step))
        for n in ast.walk(node))


def _key(node: ast.expr) -> ast.expr:
    """A subscript's key as a value: ``a:b`` -> ``slice(a, b, None)``, tuples kept."""
    if isinstance(node, ast.Slice):
        return ast.Call(func=ast.Name(id="slice", ctx=ast.Load()), keywords=[], args=[
            b if b is not None else ast.Constant(None) for b in (node.lower, node.upper,
                                                                 node.step)])
    if isinstance(node, ast.Tuple):
        return ast.Tuple(elts=[_key(e) for e in node.elts], ctx=ast.Load())
    return node


class _Stores(ast.NodeTransformer):
    """``x[a:b] = v`` -> ``rt.store_slice(x, slice(a, b, None), v)`` (rt_slices.py)."""

    def __init__(self, lines: set[int] | None = None) -> None:
        self.changed = 0
        self.lines = lines

    def visit_FunctionDef(self, node):  # another scope
        return node

    visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = visit_FunctionDef

    def _in_unrolled_body(self, node: ast.Assign) -> bool:
        """A store on a local name in an unrolled body, by any key but a constant: by 0-d
        tensors too (``mask[row, col] = v``), which Python reads as numbers there and a
        cond arm's trace cannot ("Cannot cast FakeTensor to number")."""
        target = node.targets[0]
        return (node.lineno in self.lines and not isinstance(target.slice, ast.Constant)
                and isinstance(target.value, ast.Name))

    def visit_Assign(self, node: ast.Assign) -> ast.AST:
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Subscript):
            return node
        target = node.targets[0]
        if not (self._in_unrolled_body(node) if self.lines is not None
                else _bounded(target.slice)):
            return node
        self.changed += 1
        call = rt_call("store_slice", target.value, _key(target.slice), node.value)
        return ast.copy_location(ast.Expr(value=call), node)


def slice_bounds_to_ints(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    reads = [line for line, site in ctx.sites.items() if implicit_read(site)]
    # an unrolled loop's body (bounded_loop) is traced as a cond arm the census never
    # reached (the loop broke first): its slices are read so too, and only they
    lines = None if reads else ctx.unrolled_lines
    if not reads and not lines:
        return
    stores = _Stores(lines)
    func.body = [stores.visit(stmt) for stmt in func.body]
    changed = stores.changed
    for stmt in list(walk_local(func.body)):
        if isinstance(stmt, ast.stmt) and (lines is None or stmt.lineno in lines):
            for field_name in ("value", "targets", "target", "test", "iter"):
                value = getattr(stmt, field_name, None)
                if value is None:
                    continue
                transformer = _Bounds()
                if isinstance(value, list):
                    setattr(stmt, field_name, [transformer.visit(v) for v in value])
                else:
                    setattr(stmt, field_name, transformer.visit(value))
                changed += transformer.changed
    if not changed:
        return
    for line in reads or [min(lines)]:
        ctx.decide(Action.SYMBOLIC, ast.Pass(lineno=line, end_lineno=line),
                   f"tensor slice bounds read as symbolic ints ({changed} bound(s) and "
                   f"store(s) in {ctx.qualname}); slices load and store as written")
