"""``len()`` of a tensor whose length is only known at run time becomes its symbolic size.

    num_rois = len(rois)     ->  num_rois = __stitch_rt__.length(rois)

Python's ``len`` must return an int. On a tensor whose first dimension is an unbacked size
(the rows ``nonzero``, mask indexing or NMS kept) torch.export stops there ("Could not
extract specialized integer from data-dependent expression"; torchvision's
``_multiscale_roi_align``: ``num_rois = len(rois)``), where Dynamo, which reads ``len`` of a
tensor as its size, shows no break. ``length`` gives ``t.shape[0]`` for a tensor with at least
one dimension (what ``len`` gives in eager, symbolic while exporting) and ``len(v)`` for
anything else (a 0-d tensor raises as ``len`` does).

Applied to every ``len(...)`` of a function where torch.export stopped so at a line that calls
``len`` (the builtin: a function binding ``len`` itself is left), or decided a test on an
input's size at such a line (``if len(x) >= 6:``, capture/size_tests.py), nowhere else.
"""

from __future__ import annotations

import ast

from capture import BreakSite
from capture.size_tests import SIZE_TEST_RULE

from ..plan import Action
from .context import RewriteContext
from .names import rt_call

_EXPORT_STOP = "could not extract specialized integer"


def stops_at_len(site: BreakSite) -> bool:
    """torch.export needed a Python int from a size at a line that calls ``len``, or
    decided a test on an input's size there (``if len(x) >= 6:``: ``len`` made the size a
    constant; capture/size_tests.py)."""
    if _EXPORT_STOP not in (site.gb_type + site.reason).lower() \
            and site.rule != SIZE_TEST_RULE:
        return False
    line = site.source_line.strip()
    try:
        tree = ast.parse(line)
    except SyntaxError:
        try:  # the header of a block (``if len(x) >= 6:``) parses with a body
            tree = ast.parse(f"{line}\n    pass")
        except SyntaxError:
            return False
    return any(_is_len(n) for n in ast.walk(tree))


def _is_len(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "len" and len(node.args) == 1 and not node.keywords
            and not isinstance(node.args[0], ast.Starred))


class _Lengths(ast.NodeTransformer):
    def __init__(self) -> None:
        self.changed = 0

    def visit_FunctionDef(self, node):  # another scope
        return node

    visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = visit_FunctionDef

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if not _is_len(node):
            return node
        self.changed += 1
        return ast.copy_location(rt_call("length", node.args[0]), node)


def _binds_len(func: ast.FunctionDef) -> bool:
    names = {a.arg for a in ast.walk(func.args) if isinstance(a, ast.arg)}
    return "len" in names or any(
        isinstance(n, ast.Name) and n.id == "len" and not isinstance(n.ctx, ast.Load)
        for n in ast.walk(func))


def lengths_to_sizes(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    lines = [line for line, site in ctx.sites.items() if stops_at_len(site)]
    if not lines or _binds_len(func):
        return
    lengths = _Lengths()
    func.body = [lengths.visit(stmt) for stmt in func.body]
    if not lengths.changed:
        return
    for line in lines:
        ctx.decide(Action.SYMBOLIC, ast.Pass(lineno=line, end_lineno=line),
                   f"len() of a tensor read as its symbolic size ({lengths.changed} call(s) "
                   f"in {ctx.qualname}); other values keep Python's len")
