"""A replayed log call, or helper call, made from the line the model made it on.

Replayed from the epilogue, ``logger.info(...)`` made a record whose ``pathname``,
``lineno`` and ``funcName`` were the epilogue's own (``replay.py:162 _replay_one``): a
formatter printing ``%(lineno)d`` or ``%(funcName)s`` printed other text than eager. A
helper calling ``warnings.warn(..., stacklevel=2)`` warned from the epilogue's line, and
Python's show-once-per-location filter then merged two of the model's call sites into one.

Here the call runs inside a one-line function compiled with the model's file name, the
call on the model's line number and named as the function that holds that line, its
globals sharing the module's name and ``__warningregistry__``: logging's caller lookup and
``warnings``' stack levels see the model's file, line and function, as in eager.
"""

from __future__ import annotations

import ast
import functools
import keyword
import linecache
import os
import sys
from collections.abc import Callable
from typing import Any

from capture.source import parse_file


def at_site(location: str, function: Callable, *args: Any) -> Any:
    """``function(*args)``, called from ``location`` ("file:line") where that file can be
    read; as a plain call otherwise (an artifact run where the model's source is absent)."""
    filename, _, line = location.rpartition(":")
    caller = _caller(filename, int(line)) if filename and line.isdigit() else None
    return function(*args) if caller is None else caller(function, args)


@functools.lru_cache(maxsize=512)
def _caller(filename: str, lineno: int) -> Callable | None:
    if lineno < 2 or not linecache.getlines(filename):
        return None
    name = _enclosing_function(filename, lineno)
    if not name.isidentifier() or keyword.iskeyword(name):
        name = "forward"
    source = "\n" * (lineno - 2) + f"def {name}(__call, __args):\n    return __call(*__args)\n"
    module = _module_of(filename)
    namespace: dict = {"__name__": module.__name__ if module else "__main__"}
    if module is not None:
        namespace["__warningregistry__"] = vars(module).setdefault("__warningregistry__", {})
    try:
        exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - fixed source
    except SyntaxError:
        return None
    return namespace[name]


def _enclosing_function(filename: str, lineno: int) -> str:
    """The name of the innermost function whose body holds ``lineno`` ("<module>": none)."""
    tree = parse_file(filename)
    if tree is None:
        return "<module>"
    best, start = "<module>", -1
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) \
                and node.lineno <= lineno <= (node.end_lineno or node.lineno) \
                and node.lineno > start:
            best, start = node.name, node.lineno
    return best


def _module_of(filename: str):
    real = os.path.realpath(filename)
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path and os.path.realpath(path) == real:
            return module
    return None
