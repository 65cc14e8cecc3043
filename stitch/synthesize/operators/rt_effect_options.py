"""The JSON options of a deferred effect call (print, log, warn, append, state set, helper
call), from the objects at the call site: what the epilogue needs to replay the call."""

from __future__ import annotations

from typing import Any

import torch

from ...epilogue.targets import place_of
from .rt_state import is_tracing


def effect_options(kind: str, **values: Any) -> dict:
    """JSON options of a deferred call, from the objects at the call site. An append's
    target is the list's path when stitch is recording it (export) or knows where the forward
    keeps it, else the list itself (eager runs append to it directly; ``cond_effects``
    refuses to record that)."""
    import sys as _sys

    if kind == "append":
        target = values["target"]
        path = getattr(target, "target", None)
        if (path is None and isinstance(target, list)
                and not torch.compiler.is_dynamo_compiling() and is_tracing()):
            # a list no example appended to (its branch never ran): named by where the
            # forward keeps it, the epilogue appends there
            path = place_of(target)
        return {"target": path} if path is not None else {"list": target}

    if kind in ("rebind", "add", "set_item"):  # state a branch sets: named when recorded
        start = {"start": values["start"]} if "start" in values else {}  # `d.get(k, start)`
        return {"owner": values["owner"], "attr": values["name"], **start}
    if kind == "call":  # replayed by name; eager runs call the object itself
        return {"module": values["module"], "name": values["name"],
                "callable": values["function"]}
    if kind == "print":
        file = values.get("file")
        if file is not None and file not in (_sys.stdout, _sys.stderr):
            raise RuntimeError("stitch: print to a file object inside a branch cannot be deferred")
        return {"sep": values.get("sep", " ") if values.get("sep") is not None else " ",
                "end": values.get("end", "\n") if values.get("end") is not None else "\n",
                "stream": "stderr" if file is _sys.stderr else "stdout"}
    if kind == "log":
        import logging as _logging

        if "logger_name" in values:  # ``logging.getLogger(name).warning(...)``
            return {"logger": values["logger_name"] or "", "method": values["method"]}
        if values["logger"] is _logging:  # ``logging.warning(...)``: the module's function
            return {"logger": "", "method": values["method"], "function": True}
        return {"logger": values["logger"].name, "method": values["method"]}
    category = values.get("category") or UserWarning
    where = {"filename": values["filename"], "lineno": values["lineno"],
             "module": values.get("module", "")}
    level = values.get("stacklevel")
    if level is not None and int(level) > 1:
        # ``warnings.warn(..., stacklevel=k)``: attributed to the frame k - 1 above the
        # function holding the call, as eager attributes it (these options are made in
        # that function's frame): its file, line and module, whose show-once registry the
        # replay uses
        frame = _sys._getframe(1)
        for _ in range(int(level) - 1):
            frame = frame.f_back if frame.f_back is not None else frame
        where = {"filename": frame.f_code.co_filename, "lineno": frame.f_lineno,
                 "module": frame.f_globals.get("__name__", "")}
    return {"category": f"{category.__module__}.{category.__qualname__}", **where}
