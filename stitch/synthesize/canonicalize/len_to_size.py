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
``.numel()`` the same way: of a ``torch.Size``, the product of its sizes, where
``torch.Size.numel`` would make each a constant (``if input.shape.numel() == 0:``).

``int()`` the same way: ``int(h)`` of a number known only at run time (an
element of ``grid_thw.tolist()``, transformers' ``get_vision_window_index``) is a symbolic
int already, where Python's ``int`` must make it a constant; ``as_int`` gives it as it is
(``torch.sym_int`` of a symbolic float) and ``int(v)`` for anything else.
"""

from __future__ import annotations

import ast

from capture import BreakSite
from capture.size_tests import SIZE_RULES

from ...plan import Action
from ..analysis.context import RewriteContext
from ..analysis.names import LocalTransformer, rt_call

_EXPORT_STOP = "could not extract specialized integer"


def stops_at_len(site: BreakSite) -> bool:
    """torch.export needed a Python int from a size at a line that calls ``len`` or
    ``int``, or decided a test on an input's size there (``if len(x) >= 6:``: ``len`` made
    the size a constant; capture/size_tests.py)."""
    if _EXPORT_STOP not in (site.gb_type + site.reason).lower() \
            and site.rule not in SIZE_RULES:
        return False
    return bool(_line_builtins(site))


# the builtins rewritten where torch.export needed a constant: the runtime helper for each
HELPERS = {"len": "length", "int": "as_int", "numel": "size_numel"}
SAID = {"len": "len() of a tensor read as its symbolic size",
        "int": "int() of a number known only at run time kept a symbolic int",
        "numel": "numel() of a torch.Size as the product of its symbolic sizes"}


def _builtins_in(tree: ast.AST) -> set[str]:
    return {_called(n) for n in ast.walk(tree) if _builtin_call(n)}


def _called(node: ast.Call) -> str:
    return node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id


def _numel_call(node: ast.AST) -> bool:
    """``<value>.numel()``: of a torch.Size it makes every symbolic size a constant."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "numel" and not node.args and not node.keywords)


def _builtin_call(node: ast.AST) -> bool:
    if _numel_call(node):
        return True
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in HELPERS and len(node.args) == 1 and not node.keywords
            and not isinstance(node.args[0], ast.Starred))


class _Lengths(LocalTransformer):
    def __init__(self, names: set[str]) -> None:
        self.changed = 0
        self.names = names

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if not _builtin_call(node) or _called(node) not in self.names:
            return node
        self.changed += 1
        value = node.func.value if _numel_call(node) else node.args[0]
        return ast.copy_location(rt_call(HELPERS[_called(node)], value), node)


def _bound(func: ast.FunctionDef) -> set[str]:
    """The builtins the function binds itself (a parameter or a local named ``len``)."""
    names = {a.arg for a in ast.walk(func.args) if isinstance(a, ast.arg)}
    names |= {n.id for n in ast.walk(func) if isinstance(n, ast.Name)
              and not isinstance(n.ctx, ast.Load)}
    return names & (set(HELPERS) - {"numel"})  # a method, which no local name binds


def lengths_to_sizes(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    lines = [line for line, site in ctx.sites.items() if stops_at_len(site)]
    names = set().union(*(_line_builtins(ctx.sites[line]) for line in lines)) - _bound(func)
    if not names:
        return
    lengths = _Lengths(names)
    func.body = [lengths.visit(stmt) for stmt in func.body]
    if not lengths.changed:
        return
    said = "; ".join(SAID[n] for n in sorted(names, reverse=True))
    for line in lines:
        ctx.decide(Action.SYMBOLIC, ast.Pass(lineno=line, end_lineno=line),
                   f"{said} ({lengths.changed} call(s) in {ctx.qualname}); other values "
                   "keep Python's builtin")


def _line_builtins(site: BreakSite) -> set[str]:
    line = site.source_line.strip()
    for text in (line, f"{line}\n    pass"):
        try:
            return _builtins_in(ast.parse(text))
        except SyntaxError:
            continue
    return set()


def lengths_in_test(test: ast.expr, func: ast.FunctionDef | None) -> ast.expr:
    """A data-dependent branch's test with each ``len(t)`` as ``length(t)`` (where the
    function does not bind ``len``): the test of a cond may read the length of rows the data
    chose (``if len(match_dists) == 0:`` after mask indexing, kornia's ``match_snn``), which
    ``len`` would make a constant; for anything else ``length`` is ``len``."""
    if func is not None and "len" in _bound(func):
        return test
    return _Lengths({"len"}).visit(test)
