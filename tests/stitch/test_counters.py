"""Counters: numbers a forward only adds to (``self.calls += 1``, ``Model.seen +=
x.shape[0]``, a module global, ``self.t -= 0.1``), at the top level or in a data-dependent
branch. torch.export drops them; stitch's epilogue adds the same numbers after the graph
(``add`` entries), verified over the state like every other replay. A counter the forward
also reads is refused, naming it."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import stitch

CALLS = 0  # a module global the forward counts in


class Counted(nn.Module):
    seen = 0  # on the class: rows seen by every instance

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.calls = 0
        self.t = 1.0

    def forward(self, x):
        global CALLS
        self.calls += 1
        type(self).seen += x.shape[0]  # a size: leaves the graph as a scalar
        CALLS = CALLS + 2
        self.t -= 0.1  # a float: x - 0.1 replayed as x + (-0.1), exactly
        h = self.lin(x)
        if h.sum() > 0:
            h = h * 2
        return h


class CountedInABranch(nn.Module):
    hits = 0

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.skipped = 0

    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0:
            type(self).hits += 1
            h = h * 2
        else:
            self.skipped = self.skipped + x.shape[0]  # written out: the same addition
            h = h - 1
        return h


class ReadsItsCounter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.step = 0

    def forward(self, x):
        self.step += 1
        h = self.lin(x)
        if self.step % 2 == 0:  # read: a traced program would hold the step it saw
            h = h + 1
        return h


DIM = ({0: torch.export.Dim("rows", min=2, max=64)},)


def _examples(*rows: int):
    torch.manual_seed(0)
    return [((torch.randn(n, 4),), {}) for n in rows]


@pytest.fixture(autouse=True)
def _class_state():
    saved = (Counted.seen, CountedInABranch.hits)
    yield
    Counted.seen, CountedInABranch.hits = saved


def test_counters_at_the_top_level_are_added_to_by_the_epilogue():
    global CALLS
    model = Counted()
    examples = _examples(2, 3)
    program = stitch.export(model, examples[0][0], examples=examples, dynamic_shapes=DIM)
    kinds = {e.options["target"]: e.kind for e in program.epilogue.entries}
    assert set(kinds.values()) == {"add"}
    assert {t.rpartition(".")[2] for t in kinds} == {"calls", "t", "seen", "CALLS"}
    assert any(t.startswith("class:") for t in kinds)
    assert any(t.startswith("global:") for t in kinds)
    # the model is as it was: stitch ran it, then put everything back
    assert (model.calls, model.t, Counted.seen, CALLS) == (0, 1.0, 0, 0)
    eager = Counted()
    eager.load_state_dict(model.state_dict())
    for rows in (5, 7):
        x = torch.randn(rows, 4)
        program(x)
    calls_after, t_after, seen_after, global_after = model.calls, model.t, Counted.seen, CALLS
    Counted.seen, CALLS = 0, 0
    for rows in (5, 7):
        eager(torch.randn(rows, 4))
    assert (calls_after, t_after, seen_after, global_after) == (
        eager.calls, eager.t, Counted.seen, CALLS) == (2, eager.t, 12, 4)
    assert t_after == 1.0 - 0.1 - 0.1  # the float replayed bit for bit
    CALLS = 0


def test_a_dropped_count_is_caught_by_verification(monkeypatch):
    """Sabotage: the recorder forgets the additions; verification compares the counters the
    model moved with what the program left, and refuses."""
    from stitch.epilogue.record import Recorder

    monkeypatch.setattr(Recorder, "count", lambda self, target, added, location, start: None)
    examples = _examples(2, 3)
    with pytest.raises(stitch.VerificationError):
        stitch.export(Counted(), examples[0][0], examples=examples, dynamic_shapes=DIM)


def test_a_counter_a_branch_adds_to_is_added_to_when_the_branch_ran():
    torch.manual_seed(1)
    model = CountedInABranch()
    x = torch.randn(3, 4)
    x = x * 100 if model.lin(x * 100).sum() > 0 else x * -100  # far from 0: each side
    sides = [((x,), {}), ((-x,), {})]
    assert (model.lin(x).sum() > 0) != (model.lin(-x).sum() > 0)
    program = stitch.export(model, (x,), examples=sides, dynamic_shapes=DIM)
    adds = [e for e in program.epilogue.entries if e.kind == "add"]
    assert len(adds) == 2 and all(e.guard is not None for e in adds)
    eager = CountedInABranch()
    eager.load_state_dict(model.state_dict())
    inputs = [x, -x, torch.cat([x, x]), torch.cat([-x, -x, -x])]
    for t in inputs:
        program(t)
    after = (model.skipped, CountedInABranch.hits)
    CountedInABranch.hits = 0
    for t in inputs:
        eager(t)
    assert after == (eager.skipped, CountedInABranch.hits)
    assert sum(after) > 0


def test_a_counter_held_by_a_loaded_program_counts_on_from_its_value_when_exported():
    """Unbound (a server's artifact), the counter lives in ``targets.values``, starting
    from the model's value when exported."""
    model = Counted()
    model.calls = 10
    examples = _examples(2, 3)
    program = stitch.export(model, examples[0][0], examples=examples, dynamic_shapes=DIM)
    program.targets.bind(None)  # bound to nothing
    program(torch.randn(4, 4))
    program(torch.randn(4, 4))
    assert program.targets.values["calls"] == 12
    assert model.calls == 10


def test_a_counter_the_forward_reads_is_refused_naming_it():
    examples = _examples(2, 2)
    with pytest.raises(stitch.UnsupportedSideEffectError,
                       match=r"test_counters.py:\d+: forward mutates attribute 'step'.*"
                             r"beyond adding to it"):
        stitch.export(ReadsItsCounter(), examples[0][0], examples=examples)


# a counter only a branch no example took adds to: no measurement sees it change, so only
# the source shows the addition (the examples never use the counter,
# capture/untaken_state.py); it is replayed where the branch runs, and the forced side's
# verification compares every model attribute the side changes.
UNTAKEN = """\
        if not h.mean() > 0.0:
            v2 = h[:2]
            h.add_(0.5)
            print('i2', v2.sum())
            self.calls += 1
        return h * (1.0 + 0.1 * n) * scale, n, scale
"""


def test_a_counter_only_an_untaken_branch_changes_is_replayed_where_it_runs(tmp_path, capsys):
    from tests.zoo import fuzz

    module = fuzz.load_program(fuzz.HEADER + UNTAKEN, str(tmp_path))
    model = module.Fuzz()
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(4, 8, generator=g).abs() + 1 for _ in range(2)]  # mean > 0: not taken
    assert all((model.l0(x).tanh() + x * 0.1).mean() > 0 for x in xs)
    program = stitch.export(model, (xs[0],), examples=[((xs[1],), {})])
    assert [e.guard is not None for e in program.epilogue.entries
            if e.kind == "add" and e.options["target"] == "calls"] == [True]
    taking = [-x * 3 for x in xs]
    assert all((model.l0(x).tanh() + x * 0.1).mean() <= 0 for x in taking)
    inputs = [xs[0], *taking, xs[1]]
    outs = [program(x) for x in inputs]
    eager = module.Fuzz()
    eager_outs = [eager(x) for x in inputs]
    assert model.calls == eager.calls == 2
    torch.testing.assert_close(outs, eager_outs)


def _bump(module, n):  # a helper, and a receiver not named self
    module.calls += n


class Tallied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(4, 4)
        self.inner.calls = 0
        self.tally = {"n": 0}

    def forward(self, x):
        _bump(self.inner, 2)
        tally = self.tally  # the dict through a local name
        tally["n"] += 1
        h = self.inner(x)
        if h.sum() > 0:
            h = h * 2
        return h


def test_counters_written_through_a_helper_or_an_alias_are_replayed():
    """The probe stands in for the value where it lives, so how the forward reaches it (a
    helper, another receiver name, a local alias of the dict) does not matter."""
    model = Tallied()
    examples = _examples(2, 2)
    program = stitch.export(model, examples[0][0], examples=examples)
    assert {(e.kind, e.options["target"]) for e in program.epilogue.entries} == {
        ("add", "inner.calls"), ("add", "tally")}
    program(torch.randn(2, 4))
    program(torch.randn(2, 4))
    assert (model.inner.calls, model.tally) == (4, {"n": 2})
