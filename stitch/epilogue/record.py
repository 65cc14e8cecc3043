"""Intercept side-effecting calls from user code while the model is traced."""

from __future__ import annotations

import builtins
import contextlib
import logging
import sys
import warnings
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

import torch
import torch.utils._pytree as pytree

from capture.source import is_user_file

from ..errors import UnsupportedSideEffectError
from .entries import JSON_TYPES, NUMBER_KIND, Arg, Entry, Epilogue
from .formatting import SEQUENCES, Text, has_marks, holds_sym, marking_values, template
from .record_items import RecordingDict
from .record_lists import RecordingList
from .stand_ins import CURRENT, caller, user_call, where

LOG_METHODS = ("debug", "info", "warning", "warn", "error", "critical", "fatal", "exception",
               "log", "warning_once", "info_once", "warning_advice")
MODULE_LOGS = ("debug", "info", "warning", "error", "critical", "fatal", "exception", "log")


class WrittenLater(Exception):  # noqa: N818 - a signal to the exporter, not an error
    """Tensors a deferred call took that the forward later wrote in place: the export is
    taken again with a copy of each made at the call (``Recorder(copies=...)``)."""

    def __init__(self, indices) -> None:
        super().__init__(f"outputs {sorted(indices)} are written after the call took them")
        self.indices = frozenset(indices)


SYM_KINDS = {torch.SymInt: "int", torch.SymFloat: "float", torch.SymBool: "bool"}
SCALAR_DTYPES = {"int": torch.int64, "float": torch.float64, "bool": torch.bool}


class Recorder:
    def __init__(self, copies: frozenset[int] = frozenset()) -> None:
        self.entries: list[Entry] = []
        self.outputs: list[torch.Tensor] = []
        self.marks: list[dict] = []  # values formatted into text (epilogue/formatting.py)
        self._copies = copies  # output indices to copy when taken (written in place later)
        self._versions: dict[int, tuple[torch.Tensor, int]] = {}
        # a branch's state set (a guarded ``rebind`` entry, by its index): what the state
        # held when the branch ran, to order it with a set at the forward's top level
        self.held_before: dict[int, object] = {}
        # counters a branch adds to after the forward's top level already did: the epilogue
        # adds the top level's part after the branch's, eager's order only for ints
        self.branch_adds_after_top: set[str] = set()

    def take(self, tensor: torch.Tensor, moment: bool = True) -> int:
        """Make ``tensor`` an extra graph output with its value at this moment: a copy when
        the forward writes it in place later (found by its version counter). ``moment``
        False: its value at the end (an appended tensor is the same object in the list,
        later writes included)."""
        index = len(self.outputs)
        if moment and index in self._copies:
            tensor = tensor.clone()
        elif moment:
            self._versions[index] = (tensor, tensor._version)
        self.outputs.append(tensor)
        return index

    def take_value(self, value) -> tuple[int, str | None]:
        """A tensor or a symbolic scalar as an output: (index, scalar kind or None)."""
        if isinstance(value, torch.Tensor):  # a scalar read stays the number it was read as
            number = getattr(value, NUMBER_KIND, None) if value.dim() == 0 else None
            return self.take(value), number
        kind = SYM_KINDS[type(value)]  # exact: a size past 2**24 or a double stays itself
        return self.take(torch.scalar_tensor(value, dtype=SCALAR_DTYPES[kind])), kind

    def final_outputs(self) -> tuple:
        """The extra outputs, once the forward is done; raises WrittenLater when one was
        written in place after a call took it."""
        later = {i for i, (t, v) in self._versions.items() if t._version != v}
        if later:
            raise WrittenLater(later)
        return tuple(self.outputs)

    def arg(self, value: Any, moment: bool = True) -> Arg:
        if _stood_in(value):  # print(self.hist): its text is the list's, call by call
            raise UnsupportedSideEffectError(
                f"the forward prints or logs {type(value).__mro__[1].__name__} "
                f"{value.target!r}, whose changes stitch replays after the graph: the text "
                "would be the one it had when traced, never as the calls change it. Print "
                "the items you need, or keep the state in a buffer.")
        number = getattr(value, NUMBER_KIND, None) if isinstance(value, torch.Tensor) else None
        if number is not None and value.dim() == 0:  # a scalar read handed on as it was read
            return Arg("scalar", output=self.take(value.detach(), moment), value=number)
        if isinstance(value, torch.Tensor):
            return Arg("tensor", output=self.take(value, moment))
        if isinstance(value, torch.SymInt | torch.SymFloat | torch.SymBool):
            # a size under dynamic shapes: out of the graph as a 0-d tensor, back to the
            # Python number the model had when replayed
            index, kind = self.take_value(value)
            return Arg("scalar", output=index, value=kind)
        if isinstance(value, Text):  # an f-string from a branch: formatted when replayed
            return Arg("template", value=value.records(
                self.take_value, lambda v: asdict(self.arg(v, moment))))
        if isinstance(value, str) and has_marks(value):
            return Arg("template", value=template(value, self.marks))
        if type(value) is dict and value and all(type(k) is str for k in value):
            # a mapping of values (logging's ``log.info("%(m).2f", {"m": v})``, a printed
            # dict): each value its own argument, the dict rebuilt when replayed
            return Arg("mapping", value=[[k, asdict(self.arg(v, moment))]
                                         for k, v in value.items()])
        if type(value) in SEQUENCES and holds_sym(value):
            # torch.Size([s0, 4]), (n, 4), [n, 4]: each number its own argument (a size out
            # of the graph as a scalar), the sequence rebuilt when replayed, printed as eager
            return Arg("sequence", value={"type": SEQUENCES[type(value)], "items": [
                asdict(self.arg(v, moment)) for v in value]})
        if isinstance(value, torch.Size) and all(isinstance(d, int) for d in value):
            # before the JSON types: a Size is a tuple, and printed "(2, 4)" as one
            return Arg("text", str_text=str(value), repr_text=repr(value))
        if isinstance(value, JSON_TYPES):
            return Arg("const", value=value)
        if _holds_tensor(value):
            raise UnsupportedSideEffectError(
                f"a side effect receives {type(value).__name__} holding tensors; stitch defers "
                "tensors and plain values. Pass the tensors as separate arguments.")
        return Arg("text", str_text=str(value), repr_text=repr(value))

    def rebind(self, target: str, value: Any, location: str) -> None:
        """The forward set ``target`` to ``value`` (tensors and plain values in lists, tuples
        and dicts): the epilogue sets it again to the same structure of the graph's values
        as of the end of the call (capture/rebound.py found it set before any read)."""
        leaves, spec = pytree.tree_flatten(value)
        self.entries.append(Entry("rebind", location,
                                  tuple(self.arg(v, False) for v in leaves),
                                  {"target": target, "spec": pytree.treespec_dumps(spec)}))

    def count(self, target: str, added: tuple, location: str, start) -> None:
        """The forward added ``added`` (numbers, in order) to the counter ``target``: the
        epilogue adds them again (``start``: its value for targets not yet holding one)."""
        self.entries.append(Entry("add", location, tuple(self.arg(v) for v in added),
                                  {"target": target, "start": start}))

    def defer_check(self, site: str, ok: torch.Tensor, type_name: str, message: str,
                    location: str) -> None:
        """A data-dependent check, raised by the epilogue when ``ok`` is false."""
        self.entries.append(Entry("check", location, (self.arg(ok),),
                                  {"site": site, "type": type_name, "message": message}))

    def epilogue(self) -> Epilogue:
        return Epilogue(tuple(self.entries), len(self.outputs))


def _holds_tensor(value: Any) -> bool:
    if isinstance(value, list | tuple | dict):
        items = value.values() if isinstance(value, dict) else value
        return any(isinstance(v, torch.Tensor) or _holds_tensor(v) for v in items)
    return False


def inside_body() -> bool:
    """Whether a torch.cond/while_loop body is being traced (set by the synthesis runtime):
    values there are not the graph's, so text is not deferred from there."""
    return False


@contextlib.contextmanager
def recording(copies: frozenset[int] = frozenset()) -> Iterator[Recorder]:
    """Within this context, user-code prints/logs/warnings are recorded instead of run."""
    recorder = Recorder(copies)
    CURRENT.append(recorder)
    original_print = builtins.print
    original_warn = warnings.warn
    originals = {m: vars(logging.Logger)[m] for m in LOG_METHODS if m in vars(logging.Logger)}

    def print_(*args, sep=" ", end="\n", file=None, flush=False):
        frame = caller()
        if not user_call(frame):
            return original_print(*args, sep=sep, end=end, file=file, flush=flush)
        if file is None or file is sys.stdout:
            stream = "stdout"
        elif file is sys.stderr:
            stream = "stderr"
        else:
            raise UnsupportedSideEffectError(
                f"{frame.f_code.co_filename}:{frame.f_lineno}: print to {file!r}; stitch "
                "replays prints to stdout/stderr only. Return the value and write it after "
                "the call.")
        recorder.entries.append(Entry("print", where(frame),
                                      tuple(recorder.arg(a) for a in args),
                                      {"sep": sep, "end": end, "stream": stream}))

    def warn_(message, category=None, stacklevel=1, source=None, **kwargs):
        frame = caller()
        if not user_call(frame):
            return original_warn(message, category, stacklevel + 1, source, **kwargs)
        target = sys._getframe(max(stacklevel, 1))
        if isinstance(message, Warning):
            category, message = type(message), str(message)
        category = category or UserWarning
        recorder.entries.append(Entry("warn", where(frame), (recorder.arg(message),), {
            "category": f"{category.__module__}.{category.__qualname__}",
            "filename": target.f_code.co_filename, "lineno": target.f_lineno,
            "module": target.f_globals.get("__name__", ""),
        }))

    def record_log(frame, args, kwargs, options: dict) -> None:
        extra = set(kwargs) - {"stacklevel", "stack_info"}
        if extra:
            raise UnsupportedSideEffectError(
                f"{where(frame)}: logging call with {sorted(extra)}; stitch replays "
                "message and arguments only.")
        recorder.entries.append(Entry("log", where(frame),
                                      tuple(recorder.arg(a) for a in args), options))

    def make_log(method: str):
        original = originals[method]

        def log_(self, *args, **kwargs):
            frame = caller()
            if not user_call(frame) or not isinstance(self, logging.Logger):
                return original(self, *args, **kwargs)
            record_log(frame, args, kwargs, {"logger": self.name, "method": method})
        return log_

    def make_module_log(name: str):
        original = module_logs[name]

        def log_(*args, **kwargs):  # ``logging.info(...)``: the root logger, as called
            frame = caller()
            if not user_call(frame):
                return original(*args, **kwargs)
            record_log(frame, args, kwargs, {"logger": "", "method": name, "function": True})
        return log_

    # ``logging.info(...)`` goes through the module's function (it configures the root
    # logger on first use, then logs whatever the level is when the program runs)
    module_logs = {m: vars(logging)[m] for m in MODULE_LOGS if m in vars(logging)}
    patched = {original_warn: warn_} | {
        fn: make_module_log(m) for m, fn in module_logs.items()}
    # ``from warnings import warn`` in a user module binds the function itself: rebind it
    by_id = {id(fn): replacement for fn, replacement in patched.items()}
    aliases = [(vars(m), k, by_id[id(v)]) for m in list(sys.modules.values())
               if is_user_file(getattr(m, "__file__", None) or "")
               for k, v in list(vars(m).items()) if id(v) in by_id]
    builtins.print = print_
    warnings.warn = warn_
    for name, fn in module_logs.items():
        setattr(logging, name, patched[fn])
    for namespace, key, replacement in aliases:
        namespace[key] = replacement
    for method in originals:
        setattr(logging.Logger, method, make_log(method))
    marks = marking_values(recorder.take_value,
                           lambda: CURRENT and CURRENT[-1] is recorder and not _in_body(),
                           recorder.marks)
    try:
        with marks:
            yield recorder
    finally:
        CURRENT.remove(recorder)
        builtins.print = original_print
        warnings.warn = original_warn
        for name, fn in module_logs.items():
            setattr(logging, name, fn)
        originals_of = {id(v): k for k, v in patched.items()}
        for namespace, key, replacement in aliases:
            namespace[key] = originals_of[id(replacement)]
        for method, fn in originals.items():
            setattr(logging.Logger, method, fn)


def _stood_in(value: Any) -> bool:
    """A list or dict stitch stands in for while tracing (its changes are deferred)."""
    return isinstance(value, RecordingList | RecordingDict)


def _in_body() -> bool:
    return sys.modules[__name__].inside_body()
