"""Running one side of a comparison: what a call returned or raised, printed, logged, warned
and appended (``observe``), and the record of each comparison made (``Check``).

Each side runs on its own copies of the example's tensors, with stdout and stderr captured,
every warning recorded and log records kept instead of handled (stitch's own runs print
nothing), so ``verifier.compare`` can set the model's observation beside the program's.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import sysconfig
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.utils._pytree as pytree

from capture.inputs import Example

from ..epilogue.targets import current, resolve_list


@dataclass(frozen=True)
class Check:
    """One verified comparison, for the report."""

    what: str  # "example 0", "S1 forced true" ...
    outputs: int  # tensors compared
    texts: int  # printed/logged/warned lines compared
    max_abs_error: float
    note: str = ""
    refused: bool = False  # the program refused the input by design (a guarded site)


@dataclass
class Observed:
    result: Any = None
    error: BaseException | None = None
    stdout: str = ""
    stderr: str = ""
    logs: list[tuple[str, str, str]] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    appended: dict[str, list] = field(default_factory=dict)  # list attribute -> new items
    rebound: dict[str, Any] = field(default_factory=dict)  # state set on every call -> value
    # the example's tensors after the call: each side runs on its own copy, so a forward
    # that writes its inputs in place is compared on what it wrote
    inputs_after: list = field(default_factory=list)

    @property
    def texts(self) -> int:
        return (len(self.stdout.splitlines()) + len(self.stderr.splitlines())
                + len(self.logs) + len(self.warnings)
                + sum(len(v) for v in self.appended.values()))


@dataclass(frozen=True)
class Appends:
    """The list attributes a forward appends to (paths in the model), and where one side of
    a comparison keeps them: ``lists()`` maps each path to the list appended to."""

    targets: list[str]
    lists: Callable[[], dict[str, list]]
    # the state the forward sets on every call (``rebind`` entries), and its values there
    rebound: list[str] = field(default_factory=list)
    values: Callable[[], dict[str, Any]] = dict

    @staticmethod
    def in_model(targets: list[str], model: Callable[[], Any], rebound=()) -> Appends:
        """The lists at ``targets`` and the state at ``rebound`` in ``model()`` (the model as
        of each look)."""
        return Appends(list(targets), lambda: {t: resolve_list(model(), t) for t in targets},
                       list(rebound), lambda: {t: current(model(), t) for t in rebound})

    @staticmethod
    def in_sink(sink, targets: list[str], rebound=()) -> Appends:
        """Where the program's epilogue sends them: ``sink``, a ``ListTargets``."""
        return Appends(list(targets), lambda: {t: sink(t) for t in targets}, list(rebound),
                       lambda: {t: sink.value(t) for t in rebound})


@contextlib.contextmanager
def _fresh_once_methods() -> Iterator[None]:
    """Loggers' show-once methods (transformers' ``warning_once``: an ``lru_cache`` put on
    ``logging.Logger``) made fresh for one run and put back after it, their caches as they
    were: each side's first such call logs, as ``simplefilter("always")`` makes each
    warning show. Without this, whichever side ran second logged nothing."""
    saved = {name: value for name, value in vars(logging.Logger).items()
             if callable(getattr(value, "cache_clear", None)) and hasattr(value, "__wrapped__")}
    for name, value in saved.items():
        setattr(logging.Logger, name, functools.lru_cache(None)(value.__wrapped__))
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(logging.Logger, name, value)


@contextlib.contextmanager
def _log_records(into: list) -> Iterator[None]:
    original = logging.Logger.handle

    def handle(self, record):  # compared, not printed: these are stitch's own runs
        if not self.name.startswith("torch"):  # torch's own compile chatter is not compared
            into.append((record.name, record.levelname, record.getMessage()))
        return None

    logging.Logger.handle = handle
    try:
        yield
    finally:
        logging.Logger.handle = original
    del original


_STDLIB = sysconfig.get_paths()["stdlib"]


def _library_warning(filename: str) -> bool:
    """A warning attributed to torch's or the standard library's own code is not the model's:
    torch 2.11 warns about its pytree ``LeafSpec`` from ``copyreg`` when a program is copied,
    once per run of the stitched side only (seen on the GPU machine). The model's warnings
    point at the model's lines."""
    return "/torch/" in filename or filename.startswith(_STDLIB)


# torch's C++ warnings (TORCH_WARN) end so; one the model's code triggers (a deprecated
# indexing form: Funnel 4.52's ``x[list]``) is attributed to the model's line, but it is
# torch's text, made by the op eager runs and a graph does not
_TORCH_WARN = "(Triggered internally at "


def _torch_internal(message) -> bool:
    return _TORCH_WARN in str(message)


def observe(fn: Callable, ex: Example, appends: Appends | None = None) -> Observed:
    """Run ``fn`` on an example, keeping its result or exception, everything it said and
    what it appended to the list attributes in ``appends``."""
    seen = Observed()
    args, kwargs = pytree.tree_map_only(torch.Tensor, lambda t: t.clone(), (ex.args, ex.kwargs))
    start = {t: len(v) for t, v in appends.lists().items()} if appends else {}
    out, err = io.StringIO(), io.StringIO()
    with warnings.catch_warnings(record=True) as caught, _log_records(seen.logs), \
            _fresh_once_methods(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), torch.no_grad():
        warnings.simplefilter("always")
        try:
            seen.result = fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - compared, not swallowed
            seen.error = e
    seen.inputs_after = [t for t in pytree.tree_leaves((args, kwargs))
                         if isinstance(t, torch.Tensor)]
    seen.stdout, seen.stderr = out.getvalue(), err.getvalue()
    seen.warnings = [(w.category.__name__, str(w.message)) for w in caught
                     if not _library_warning(w.filename) and not _torch_internal(w.message)]
    if appends:
        lists = appends.lists()
        seen.appended = {t: list(lists.get(t, [])[start.get(t, 0):]) for t in appends.targets}
        seen.rebound = dict(appends.values())
    return seen
