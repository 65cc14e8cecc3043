"""State a running thread changes on its own while the forward runs (tqdm's monitor thread,
reached through a class attribute, records when it last woke): not the forward's mutation,
neither refused nor reported as a difference by verification."""

from __future__ import annotations

import threading

import torch

import stitch
from capture.object_state import running_thread


class Ticker(threading.Thread):
    """Sets its own attribute every 0.2 ms, from its own thread."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.ticks = 0
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(0.0002):
            self.ticks += 1


class Progress:
    monitor: Ticker | None = None  # like ``tqdm.monitor``: a class attribute holding a thread


class ReachesTheMonitor(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        if Progress.monitor is None:  # the forward's code reaches the class and its slot
            return x
        h = self.lin(x)
        if h.sum() > 0:  # a data-dependent branch: stitch's own path, not torch.export's
            return h * 2
        return h - 1


def test_a_running_threads_own_writes_are_not_the_forwards():
    ticker = Ticker()
    Progress.monitor = ticker
    ticker.start()
    try:
        while ticker.ticks == 0:  # the thread writes from here on
            threading.Event().wait(0.001)
        assert running_thread(ticker)
        torch.manual_seed(0)
        model, x = ReachesTheMonitor(), torch.randn(3, 4)
        program = stitch.export(model, (x,), examples=[((-x,), {}), ((x * 3,), {})])
        for args in ((x,), (-x,)):
            torch.testing.assert_close(program(*args), model(*args))
        assert ticker.ticks > 0 and ticker.is_alive()
    finally:
        ticker.halt.set()
        ticker.join()
        Progress.monitor = None
    assert not running_thread(ticker)  # a finished thread's object is read by attributes
