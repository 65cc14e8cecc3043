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

import functools
import keyword
import linecache
from collections.abc import Callable
from typing import Any

from capture.source import enclosing_function, module_of_file


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
    function = enclosing_function(filename, lineno)
    name = function.name if function is not None else "<module>"
    if not name.isidentifier() or keyword.iskeyword(name):
        name = "forward"
    source = "\n" * (lineno - 2) + f"def {name}(__call, __args):\n    return __call(*__args)\n"
    module = module_of_file(filename)
    namespace: dict = {"__name__": module.__name__ if module else "__main__"}
    if module is not None:
        namespace["__warningregistry__"] = vars(module).setdefault("__warningregistry__", {})
    try:
        exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - fixed source
    except SyntaxError:
        return None
    return namespace[name]
