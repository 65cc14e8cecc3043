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


def test_a_state_difference_is_named_down_to_the_value_that_changed():
    """Verification's message names the item or attribute that differs, not only the slot
    (``Progress.monitor.ticks``, ``REG['runs'][1]``)."""
    from stitch.verify.state import _first_difference, _value

    class Record:
        def __init__(self, ticks):
            self.name, self.ticks = "m", ticks

    first, second = Record(1), Record(2)
    path, a, b = _first_difference(_value(first), _value(second), 0, 0)
    assert path == ""  # two different objects: the object itself
    one = Record(1)
    before = _value(one)
    one.ticks = 2
    assert _first_difference(before, _value(one), 0, 0) == (".ticks", ("value", 1),
                                                           ("value", 2))
    path, a, b = _first_difference(_value({"runs": [1, 2]}), _value({"runs": [1, 3]}), 0, 0)
    assert (path, a, b) == ("['runs'][1]", ("value", 2), ("value", 3))
    path, _, _ = _first_difference(_value({"runs": [1]}), _value({"runs": [1, 3]}), 0, 0)
    assert path == "['runs']"  # lengths differ: the list itself
