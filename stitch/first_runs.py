"""What the first eager runs of the examples tell the pipeline before anything is traced."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

import torch

from capture.inputs import Example
from capture.isolation import preserved_rng, restoring_state, silenced_output

from . import pytree_types
from .epilogue.targets import UNTAKEN


def warm_up(work, inputs: list[Example]) -> tuple[list, tuple | None, bool]:
    """Run the examples once so attributes a forward creates lazily (cached tables, e.g.
    LongRoPE's long factors) exist before rewriting; parameters and buffers are restored,
    but for a buffer rebound to a table of another shape: the attributes the runs leave
    describe it (a rotary cache grown to the longest example and its length), and the
    original table with the grown length would be a state no call of the model makes.
    Returns the inputs and the outputs the runs gave, example 0's output in a 1-tuple
    (None when it failed), and whether every example ran without printing, logging or
    warning anything."""
    seen: list = []
    first, failed = None, False
    with restoring_state(work, keep_resized=True), preserved_rng(), torch.no_grad(), \
            silenced_output() as observed:
        for i, ex in enumerate(inputs):
            seen.append((ex.args, ex.kwargs))
            try:
                seen.append(work(*ex.args, **ex.kwargs))
            except Exception:  # noqa: BLE001 - the census reports the model's own errors
                failed = True
                continue
            first = (seen[-1],) if i == 0 else first
    said = bool(observed.stdout or observed.warnings or observed.logs)
    return seen, first, not (failed or said)


def changes_state(changes) -> bool:
    """Whether the state analysis's runs said anything (printed, logged, warned) or found
    anything they change (appends, tensors, rebinds, counters, items, draws; not the state
    only paths no example took could change): then the census says where, for the
    report."""
    return bool(changes.said or changes.appends or changes.tensors or changes.draws
                or changes.unchecked
                or set(changes.rebinds) - UNTAKEN or set(changes.counters) - UNTAKEN
                or set(changes.items) - UNTAKEN)


def register_containers(values) -> list[str]:
    """Library containers in the inputs and outputs (transformers' caches, dataclasses),
    registered as pytrees for torch.export, those inside them too; their names, for the
    report."""
    types: list[str] = []
    while found := [t for t in pytree_types.unregistered(values) if t not in types]:
        pytree_types.register(found)
        types += found
    return types


STACK_DEPTH = 10_000  # Python frames; far from the C stack a thread has (8 MiB)


@contextlib.contextmanager
def deep_stack() -> Iterator[None]:
    """Python's recursion limit raised for one export (put back after): Dynamo's census and
    torch.cond's tracing inline one Python frame per nested call, and a chain of eight
    ``elif``s on data (eight nested conds) takes close to Python's default of 1000 frames
    before the model's own calls are counted."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, STACK_DEPTH))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)
