"""State held in objects whose contents are not a ``__dict__`` (an iterator, a numpy array,
an ``OrderedDict``, a ``__slots__`` dataclass, a ``StringIO``): read by value, so a forward
that changes it is refused, never exported as a program that changes nothing (each of these
compared by identity, and exported)."""

from __future__ import annotations

import collections
import dataclasses
import io

import numpy as np
import pytest
import torch

import stitch
from stitch.errors import StitchError, VerificationError

STEPS = iter(range(1000))  # a module global the forward advances


class WarmsUp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.warm = iter(range(4))

    def forward(self, x):
        w = next(self.warm, None)
        if x.sum() > 0:
            x = x + 1
        return x * 2 if w is None else x


class CountsInAnArray(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.calls = np.zeros(2, dtype=np.int64)

    def forward(self, x):
        self.calls[0] += 1  # no break: exported as written (Dynamo's numpy path met the
        return x * 2  # torch.as_tensor shim and recursed without end, also fixed)


class KeepsLastInOrder(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.seen = collections.OrderedDict()

    def forward(self, x):
        if x.sum() > 0:
            x = x * 2
        self.seen["last"] = x.shape[0] + len(self.seen)
        return x


@dataclasses.dataclass(slots=True)
class Stats:
    n: int = 0


class CountsInSlots(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stats = Stats()

    def forward(self, x):
        self.stats.n += x.shape[0]
        if x.sum() > 0:
            return x * 2
        return x


class StepsAGlobal(torch.nn.Module):
    def forward(self, x):
        next(STEPS)
        if x.sum() > 0:
            return x * 2
        return x


class WritesAStream(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.buf = io.StringIO()

    def forward(self, x):
        self.buf.write("rows\n")  # Dynamo breaks here: exported as written
        return x * 2


@pytest.mark.parametrize("model, name", [
    (WarmsUp, "warm"), (CountsInAnArray, "calls"), (KeepsLastInOrder, "seen"),
    (CountsInSlots, "stats"), (StepsAGlobal, "STEPS"), (WritesAStream, "buf")])
def test_state_held_outside_a_dict_that_the_forward_changes_is_refused(model, name):
    """Refused naming the state (the stream's refusal is the break Dynamo met, with the
    as-written export's verification failing on ``buf``)."""
    x = torch.ones(3)
    with pytest.raises(StitchError, match=name):
        stitch.export(model(), (x,), examples=[((-x,), {})])


def test_a_global_the_forward_advances_is_named_with_what_changed():
    """The model's run moves the iterator; stitch cannot put it back to run the program
    from the same state: refused, naming the slot (it compared equal after both runs, as
    the program started where the model left it)."""
    x = torch.ones(3)
    with pytest.raises(VerificationError, match="STEPS") as e:
        stitch.export(StepsAGlobal(), (x,), examples=[((-x,), {})])
    assert "can neither put back nor replay" in str(e.value)
