"""torch spelled as the model's module spells it, written as ``torch.<name>`` first.

    import torch as th                        th.cat(parts, 1)      ->  torch.cat(parts, 1)
    from torch import cat, split              split(x, n.tolist())  ->  torch.split(x, n.tolist())

The passes recognise torch's functions by their written name (``torch.cat``, ``torch.split``,
``torch.tensor``, ``torch.where``, ``torch.arange``, ``torch.eq`` ...). A name the module
binds to the torch module, or to one of torch's own functions, is written as ``torch`` or
``torch.<name>`` before they run, so every spelling meets the same rewrites. The objects are
the same ones, so the function means what it meant; names the function binds itself (a
parameter, an assignment, a comprehension's target, an ``except ... as`` name) and names
its closure holds (looked up before the globals) are never touched. Where the module has
no name ``torch``, the rewritten function is given one (``functions.compile_function``);
where its ``torch`` is something else, nothing is rewritten here.
"""

from __future__ import annotations

import ast
import types

import torch

from ..analysis.context import RewriteContext


def torch_spellings(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    names = ctx.module_globals  # the function's own globals (round_build, helper_rewrites)
    if names is None or names.get("torch", torch) is not torch:
        return
    # a name the closure holds is the closure's (Python looks there before the globals)
    local = bound_anywhere(func) | set(ctx.freevars)
    if "torch" in local:
        return
    spelled = {k: v for k, v in list(names.items())
               if k not in local and k != "torch" and _torch_spelling(v) is not None}
    if spelled:
        _Respell(spelled).visit(func)


def _torch_spelling(value) -> str | None:
    """``""`` for the torch module, the attribute name for one of torch's own functions
    (``torch.cat``), else None."""
    if value is torch:
        return ""
    if not isinstance(value, types.BuiltinFunctionType | types.FunctionType):
        return None  # first: any other object's attributes may run its own code
    try:
        name = value.__name__
        return name if isinstance(name, str) and getattr(torch, name, None) is value else None
    except Exception:  # noqa: BLE001 - an attribute torch cannot give: not torch's
        return None


class _Respell(ast.NodeTransformer):
    def __init__(self, spelled: dict) -> None:
        self.spelled = spelled

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if not isinstance(node.ctx, ast.Load) or node.id not in self.spelled:
            return node
        attr = _torch_spelling(self.spelled[node.id])
        torch_name = ast.copy_location(ast.Name("torch", ast.Load()), node)
        if not attr:
            return torch_name
        return ast.copy_location(ast.Attribute(torch_name, attr, ast.Load()), node)


def bound_anywhere(func: ast.FunctionDef) -> set[str]:
    """Every name the function (or a function inside it) binds: parameters, stores,
    imports, ``global``/``nonlocal`` declarations (kept as they are)."""
    out: set[str] = set()
    for node in ast.walk(func):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            out.add(node.id)
        elif isinstance(node, ast.arg):
            out.add(node.arg)
        elif isinstance(node, ast.alias):
            out.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.Global | ast.Nonlocal):
            out.update(node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            out.add(node.name)
        elif isinstance(node, ast.MatchAs | ast.MatchStar) and node.name:
            out.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            out.add(node.rest)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) \
                and node is not func:
            out.add(node.name)
    return out
