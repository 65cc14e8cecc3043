"""Timing candidates as deployments run them: interleaved, quiet, the epilogue replayed."""

from __future__ import annotations

import contextlib
import io
import logging
import time
import warnings
from collections.abc import Callable

import torch

from capture.inputs import Example

from ..epilogue import ListTargets
from ..running import run_with_epilogue


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


@contextlib.contextmanager
def _quiet():
    """Timing runs the model, which prints, logs and warns on every call: nothing of it is
    shown (it was compared when the program was verified)."""
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        level = logging.root.manager.disable
        logging.disable(logging.CRITICAL)
        try:
            yield
        finally:
            logging.disable(level)


def with_epilogue(run: Callable, epilogue) -> Callable:
    """A graph candidate as a deployment runs it: the graph, then its epilogue replayed (the
    model prints for itself; timing both without their side effects would favour graphs).
    Appends go to a throwaway ListTargets."""
    sink = ListTargets()

    def timed(*args, **kwargs):
        return run_with_epilogue(run, epilogue, args, kwargs, lists=sink)
    return timed


def time_interleaved(runs: dict[str, Callable], examples: list[Example], warmup: int,
                      repeats: int) -> dict[str, list[float]]:
    """Milliseconds per input: each repeat runs every candidate once over all the examples
    (a data-dependent model costs what its inputs make it do: a loop's trips, the branch
    taken), in a freshly shuffled order (seeded): a fixed order would always time a
    candidate right after the same neighbour, whose cache footprint then biases it."""
    import random

    times: dict[str, list[float]] = {n: [] for n in runs}
    order = list(runs)
    shuffle = random.Random(0).shuffle
    with torch.no_grad(), _quiet():
        for _ in range(warmup):
            for run in runs.values():
                for ex in examples:
                    run(*ex.args, **ex.kwargs)
        sync()
        for _ in range(repeats):
            shuffle(order)
            for name in order:
                run = runs[name]
                start = time.perf_counter()
                for ex in examples:
                    run(*ex.args, **ex.kwargs)
                sync()
                times[name].append((time.perf_counter() - start) * 1e3 / len(examples))
    return times
