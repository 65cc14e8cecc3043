"""Source locations: which frames are the user's, and which statement a line belongs to."""

from __future__ import annotations

import ast
import functools
import linecache
import os
import sys
import sysconfig
import types
import warnings
from dataclasses import dataclass

import torch

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_STDLIB_DIRS = tuple(
    os.path.realpath(p) + os.sep
    for p in {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]}
)
_HERE = os.path.dirname(os.path.abspath(__file__))
# capture itself and stitch (the run-time helpers rewritten code calls, the epilogue, a
# server's log record factory ...): a break inside them belongs to the user line that called
# them. stitch/demo_model.py is the demo's example model, which is user code. Paths, not
# imports: capture never imports stitch.
_OWN_DIRS = (
    _HERE + os.sep,
    os.path.join(os.path.dirname(_HERE), "stitch") + os.sep,
)
_EXAMPLE_FILES = (os.path.join(os.path.dirname(_HERE), "stitch", "demo_model.py"),)


@functools.lru_cache(maxsize=8192)  # called for every log record while recording
def is_user_file(filename: str) -> bool:
    """True for files whose code the user (or a model library such as transformers) owns.

    torch itself, the standard library and stitch's own capture code are not user code;
    site-packages libraries such as transformers are, because their breaks are the user's.
    """
    if not filename or filename.startswith("<frozen"):
        return False
    if filename.startswith("<"):
        return True  # exec'd or generated code is still the user's
    real = os.path.realpath(filename)
    if real.startswith(_TORCH_DIR) or filename.startswith(_TORCH_DIR):
        return False
    if "site-packages" not in real and any(real.startswith(d) for d in _STDLIB_DIRS):
        return False
    if real in _EXAMPLE_FILES:
        return True
    return not any(real.startswith(d) for d in _OWN_DIRS)


def aliases(filename: str, value: object) -> frozenset[str]:
    """Names the module loaded from ``filename`` binds to ``value`` (``from warnings import
    warn as w``, ``from torch import _assert``, a library's re-export of either), and the
    dotted names that reach it through a module it imports (``th._assert``): a call
    through one is a call of ``value``, whatever it is spelled."""
    for module in list(sys.modules.values()):
        if getattr(module, "__file__", None) == filename:
            names = vars(module).items()
            # and through a module it imports (``import torch as th``: ``th._assert``,
            # ``from timm import layers``: ``layers._assert``)
            return frozenset([k for k, v in names if v is value] + [
                f"{k}.{a}" for k, v in names if isinstance(v, types.ModuleType)
                for a, w in list(vars(v).items()) if w is value])
    return frozenset()


def warn_aliases(filename: str) -> frozenset[str]:
    """Names the module loaded from ``filename`` binds to ``warnings.warn``: calls through
    them are warnings too."""
    return aliases(filename, warnings.warn)


def assert_aliases(filename: str) -> frozenset[str]:
    """Names the module loaded from ``filename`` binds to ``torch._assert`` (timm's
    ``_assert``): a call through one is an assert."""
    import torch

    return aliases(filename, torch._assert)


@functools.lru_cache(maxsize=256)
def parse_file(filename: str) -> ast.Module | None:
    """The AST of a whole source file, or None when its source is not available."""
    lines = linecache.getlines(filename)
    if not lines:
        return None
    try:
        return ast.parse("".join(lines), filename=filename)
    except SyntaxError:
        return None


def source_line(filename: str, lineno: int) -> str:
    return linecache.getline(filename, lineno).strip()


@dataclass(frozen=True)
class Statement:
    """The innermost statement that contains a line, and the function that contains it."""

    node: ast.stmt
    function: ast.FunctionDef | ast.AsyncFunctionDef | None


def statement_at(filename: str, lineno: int) -> Statement | None:
    """The innermost statement whose *header* spans ``lineno``.

    For compound statements (``if``, ``for``, ``while``) only the header counts, so a line
    inside an ``if`` body maps to the body statement, not to the ``if``.
    """
    tree = parse_file(filename)
    if tree is None:
        return None
    best: Statement | None = None
    function = None

    def visit(node: ast.AST, func) -> None:
        nonlocal best
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.stmt):
                continue
            end = _header_end(child)
            if child.lineno <= lineno <= (child.end_lineno or child.lineno):
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                    visit(child, child)
                    continue
                if child.lineno <= lineno <= end:
                    best = Statement(child, func)
                visit(child, func)

    visit(tree, function)
    return best


_OWN_SCOPES = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda)


@functools.lru_cache(maxsize=4096)
def statement_line(filename: str, lineno: int) -> int:
    """The line a break at ``lineno`` is named by: the first line of the statement whose
    header holds it, or of the conditional expression whose test holds it.

    A test written over several lines (``if (\n a\n and t.item() > 0\n):``, a call with
    one argument per line) breaks on the line of the part that read the tensor, where the
    rewrites know a statement (and ``a if t else b``) by its first line: every spelling of
    a statement is then one site. ``lineno`` itself where it is that first line already,
    inside a comprehension or lambda (a scope of its own, found by its own line), or where
    the source is not found."""
    statement = statement_at(filename, lineno)
    if statement is None or statement.node.lineno == lineno:
        return lineno
    node = statement.node
    best = None
    for part in _header_parts(node):
        for n in ast.walk(part):
            if isinstance(n, _OWN_SCOPES) and _spans(n, lineno):
                return lineno
            if isinstance(n, ast.IfExp) and _spans(n.test, lineno) \
                    and (best is None or n.test.lineno >= best.test.lineno):
                best = n
    return best.lineno if best is not None else node.lineno


def _spans(node: ast.AST, lineno: int) -> bool:
    return node.lineno <= lineno <= (node.end_lineno or node.lineno)


def _header_parts(node: ast.stmt) -> list[ast.AST]:
    """The expressions of a statement's header (all of a simple statement)."""
    if isinstance(node, ast.If | ast.While):
        return [node.test]
    if isinstance(node, ast.For | ast.AsyncFor):
        return [node.target, node.iter]
    if isinstance(node, ast.With | ast.AsyncWith):
        return [i.context_expr for i in node.items]
    if isinstance(node, ast.Try | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
        return []
    return [node]


def _header_end(node: ast.stmt) -> int:
    """Last line of a statement's header: the test of an if/while, the iter of a for."""
    if isinstance(node, ast.If | ast.While):
        return node.test.end_lineno or node.lineno
    if isinstance(node, ast.For | ast.AsyncFor):
        return node.iter.end_lineno or node.lineno
    if isinstance(node, ast.With | ast.AsyncWith):
        return max((i.context_expr.end_lineno or node.lineno) for i in node.items)
    if isinstance(node, ast.Try | ast.ClassDef):
        return node.lineno
    return node.end_lineno or node.lineno


def enclosing_function(filename: str, lineno: int) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The innermost function definition that contains ``lineno``."""
    tree = parse_file(filename)
    if tree is None:
        return None
    found = None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if node.lineno <= lineno <= (node.end_lineno or node.lineno):
                if found is None or node.lineno >= found.lineno:
                    found = node
    return found


def module_of_file(filename: str):
    """The imported module whose ``__file__`` is ``filename`` (the same file reached by
    another path, a symlink, counts), or None."""
    modules = list(sys.modules.values())
    for module in modules:
        if getattr(module, "__file__", None) == filename:
            return module
    real = os.path.realpath(filename)
    for module in modules:
        path = getattr(module, "__file__", None)
        if path and os.path.realpath(path) == real:
            return module
    return None


def qualname_at(filename: str, lineno: int) -> str:
    """Qualified name of the innermost function containing ``lineno`` (``Cls.method``)."""
    tree = parse_file(filename)
    if tree is None:
        return ""
    best: list[str] = []

    def visit(node: ast.AST, path: list[str]) -> None:
        nonlocal best
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                start = min([child.lineno] + [d.lineno for d in child.decorator_list])
                if start <= lineno <= (child.end_lineno or child.lineno):
                    if isinstance(child, ast.ClassDef):
                        visit(child, path + [child.name])
                    else:
                        best = path + [child.name]
                        visit(child, best + ["<locals>"])
            elif isinstance(child, ast.stmt):
                visit(child, path)

    visit(tree, [])
    return ".".join(best)


def header_lines(filename: str, lineno: int) -> range:
    """The lines of the header of the statement at ``lineno`` (a whole simple statement;
    an ``if``'s test, a ``for``'s iterable); just ``lineno`` where the source is not found."""
    statement = statement_at(filename, lineno)
    if statement is None:
        return range(lineno, lineno + 1)
    return range(statement.node.lineno, _header_end(statement.node) + 1)
