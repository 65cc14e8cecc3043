"""Run-time state of rewritten code: per-thread forcing and counters, the export's check
policy, and whether a trace is in progress."""

from __future__ import annotations

import contextlib
import threading

import torch

from ...epilogue import record as _record_module
from ...errors import StitchError


class Runtime(threading.local):
    """Per-thread state: forced branch outcomes (verification runs)."""

    def __init__(self) -> None:
        self.force: dict[str, bool] = {}  # site id -> outcome, for eager forced runs
        self.eager_branches = False  # run conds as plain Python (forced verification runs)
        self.outcomes: list[tuple[str, bool]] = []  # (site, taken) seen in eager runs
        self.checks = "auto"  # Settings.checks of the export in progress
        self.bodies = 0  # torch.cond/while_loop bodies being traced right now
        self.probing = 0  # branches with side effects running their arms for metadata
        self.raise_probe = 0  # arms run to see whether they raise (rt_raising.py)


RT = Runtime()


def _tracing_a_body() -> bool:
    return RT.bodies > 0


_record_module.inside_body = _tracing_a_body  # text formatted in a body stays as it was


def in_traced_body():
    """Counts the branch/loop bodies being traced: a check inside one stays in the graph (the
    epilogue sees only the top level). Not under Dynamo, which would trace the counter; there
    a ``nullcontext``, which Dynamo knows: a break inside a generator context manager is
    reported as "Graph break under GenericContextWrappingVariable", its reason lost."""
    if torch.compiler.is_dynamo_compiling():
        return contextlib.nullcontext()
    return _counting_body()


@contextlib.contextmanager
def _counting_body():
    RT.bodies += 1
    try:
        yield
    finally:
        RT.bodies -= 1


@contextlib.contextmanager
def check_policy(mode: str):
    """``Settings.checks`` for the export in progress."""
    if mode not in ("auto", "graph", "epilogue"):
        raise StitchError(f"Settings.checks is {mode!r}; expected 'auto', 'graph' or "
                          "'epilogue'")
    previous, RT.checks = RT.checks, mode
    try:
        yield
    finally:
        RT.checks = previous


def is_tracing() -> bool:
    from torch.fx.experimental.proxy_tensor import get_proxy_mode

    return get_proxy_mode() is not None or torch._guards.detect_fake_mode() is not None
