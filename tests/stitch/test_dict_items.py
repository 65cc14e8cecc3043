"""Dict items: a dict (an attribute, on the class, a module global) whose items the forward
sets to values it computes (``self.stats["last"] = h.mean()``) or only adds to
(``COUNTS["calls"] += 1``). torch.export drops both; the epilogue replays them
(``set_item`` and keyed ``add`` entries), verified over the state. A dict whose changed
items the forward reads first, or tests for, is refused naming it."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import stitch

COUNTS = {"calls": 0, "fixed": 3}  # "calls" only added to; "fixed" only read


class Items(nn.Module):
    log: dict = {}  # on the class

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.stats = {"scale": 2.0}

    def forward(self, x):
        COUNTS["calls"] += 1
        h = self.lin(x) * self.stats["scale"] * COUNTS["fixed"]
        self.stats["last"] = h.mean()
        self.stats["pair"] = [h.sum(), 3]
        type(self).log["rows"] = x.shape[0]  # a size: follows each input
        if h.sum() > 0:
            h = h * 2
        return h + self.stats["last"]  # reads what this call set


class ReadsFirst(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.ema = {"h": 0.0}

    def forward(self, x):
        h = self.lin(x)
        self.ema["h"] = self.ema["h"] * 0.9 + h.mean()  # reads the last call's item
        return h


class ChecksFirst(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.seen = {}

    def forward(self, x):
        if "n" not in self.seen:
            self.seen["n"] = 0
        self.seen["n"] += 1
        return self.lin(x)


DIM = ({0: torch.export.Dim("rows", min=2, max=64)},)


def _examples(*rows):
    torch.manual_seed(0)
    return [((torch.randn(n, 4),), {}) for n in rows]


@pytest.fixture(autouse=True)
def _shared_state():
    saved = dict(COUNTS), dict(Items.log)
    yield
    COUNTS.clear(), COUNTS.update(saved[0])
    Items.log.clear(), Items.log.update(saved[1])


def test_items_set_and_added_to_are_replayed_by_the_epilogue():
    model = Items()
    examples = _examples(2, 3)
    program = stitch.export(model, examples[0][0], examples=examples, dynamic_shapes=DIM)
    kinds = sorted((e.kind, e.options["key"]) for e in program.epilogue.entries
                   if e.kind in ("add", "set_item"))
    assert kinds == [("add", "calls"), ("set_item", "last"), ("set_item", "pair"),
                     ("set_item", "rows")]
    assert COUNTS == {"calls": 0, "fixed": 3} and Items.log == {}  # put back
    assert set(model.stats) == {"scale"}
    eager = Items()
    eager.load_state_dict(model.state_dict())
    inputs = [torch.randn(5, 4), torch.randn(7, 4)]
    outs = [program(x) for x in inputs]
    got = (dict(COUNTS), dict(Items.log), dict(model.stats))
    COUNTS["calls"] = 0
    Items.log.clear()
    for x, out in zip(inputs, outs, strict=True):
        torch.testing.assert_close(out, eager(x))
    assert got[0] == COUNTS == {"calls": 2, "fixed": 3}
    assert got[1] == Items.log == {"rows": 7}
    assert set(got[2]) == set(eager.stats) == {"scale", "last", "pair"}
    torch.testing.assert_close(got[2]["last"], eager.stats["last"])
    torch.testing.assert_close(got[2]["pair"], eager.stats["pair"])


def test_a_dropped_item_set_is_caught_by_verification(monkeypatch):
    from stitch.epilogue import record_items

    real = record_items.RecordingDict.__setitem__

    def forget(self, key, value):  # records the counter, forgets the sets
        if self._keys.get(key) == "add":
            return real(self, key, value)
        self._now[key] = value

    monkeypatch.setattr(record_items.RecordingDict, "__setitem__", forget)
    examples = _examples(2, 3)
    with pytest.raises(stitch.VerificationError):
        stitch.export(Items(), examples[0][0], examples=examples, dynamic_shapes=DIM)


@pytest.mark.parametrize("make", [ReadsFirst, ChecksFirst])
def test_a_dict_whose_changed_items_are_read_first_is_refused_naming_it(make):
    examples = _examples(2, 2)
    with pytest.raises(stitch.UnsupportedSideEffectError,
                       match=r"test_dict_items.py:\d+: forward .*attribute '(ema|seen)'.*"
                             r"reads items it changes"):
        stitch.export(make(), examples[0][0], examples=examples)


STATS = {"hits": 0}


class ItemsInABranch(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.stats = {}

    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0:
            STATS["hits"] += 1
            self.stats["pos"] = h.mean()
            h = h * 2
        else:
            STATS["hits"] = STATS["hits"] - 1 + 1  # `x = x - 1 + 1`: an addition, then one more
            h = h - 1
        return h


def test_items_a_branch_sets_or_adds_to_are_replayed_when_the_branch_ran():
    torch.manual_seed(1)
    model = ItemsInABranch()
    x = torch.randn(3, 4)
    x = x * 100 if model.lin(x * 100).sum() > 0 else x * -100  # far from 0: each side
    saved = dict(STATS)
    program = stitch.export(model, (x,), examples=[((x,), {}), ((-x,), {})])
    guarded = [e for e in program.epilogue.entries if e.guard is not None]
    assert {(e.kind, e.options["key"]) for e in guarded} >= {("add", "hits"),
                                                             ("set_item", "pos")}
    assert STATS == saved
    eager = ItemsInABranch()
    eager.load_state_dict(model.state_dict())
    inputs = [x, -x, x * 2, -x]
    for t in inputs:
        program(t)
    got = dict(STATS), dict(model.stats)
    STATS.clear(), STATS.update(saved)
    for t in inputs:
        eager(t)
    assert got[0] == STATS
    assert set(got[1]) == set(eager.stats) == {"pos"}
    torch.testing.assert_close(got[1]["pos"], eager.stats["pos"])
    STATS.clear(), STATS.update(saved)



LAST = {}  # a module global dict a loop in a branch sets an item of


class ItemInALoopInABranch(nn.Module):
    """The item set in a loop (counted by data) inside a branch: the inner cond's effect
    options name the dict inside the outer arm, which torch.cond's trace (Dynamo) guards on
    (``len()``): that is Dynamo's own use, not the forward's."""

    def forward(self, x):
        h = x * 1.5
        if h[:, -1].max() > -5.0:
            for _ in range(1 + int((h > 2.0).any())):
                LAST["mean"] = h.mean()
                h = h - 0.5
        else:
            h = -h
        return h


def test_an_item_set_in_a_loop_inside_a_branch_is_replayed():
    model = ItemInALoopInABranch()
    xs = [torch.rand(4, 8), torch.rand(4, 8) + 2.5, -torch.rand(4, 8) - 4.0]
    LAST.clear()
    program = stitch.export(model, (xs[0],), examples=[((x,), {}) for x in xs[1:]])
    assert LAST == {}
    for x in xs:
        LAST.clear()
        want, items = model(x), dict(LAST)
        LAST.clear()
        torch.testing.assert_close(program(x), want)
        assert set(LAST) == set(items)
        for key in items:
            torch.testing.assert_close(LAST[key], items[key])
    LAST.clear()


HOT = {}  # empty when exported: the count starts from `get`'s default


class GetCounter(nn.Module):
    def forward(self, x):
        h = x * 2
        if h.mean() > 0:
            HOT["hot"] = HOT.get("hot", 0) + 1  # no `global`, no `+=`
            h = h + 1
        return h


def test_an_item_counted_through_get_with_a_default_in_a_branch():
    program = stitch.export(GetCounter(), (torch.ones(2, 3),),
                            examples=[((-torch.ones(3, 3),), {})])
    assert HOT == {} and program.report.graphs_after == 1
    inputs = [torch.ones(2, 3), -torch.ones(4, 3), torch.ones(5, 3), torch.ones(3, 3)]
    for t in inputs:
        program(t)
    got = dict(HOT)
    HOT.clear()
    model = GetCounter()
    for t in inputs:
        model(t)
    assert got == HOT == {"hot": 3}
    HOT.clear()

@pytest.mark.slow
def test_a_saved_program_keeps_items_and_counters_in_its_targets(tmp_path):
    """Loaded (no model bound), a counter and a dict's items live in ``targets.values``:
    counters count on from the values the model held when exported; a dict holds the items
    the forward sets."""
    from test_counters import DIM as ROWS
    from test_counters import Counted

    model = Items()
    examples = _examples(2, 3)
    program = stitch.export(model, examples[0][0], examples=examples, dynamic_shapes=DIM)
    loaded = stitch.load(program.save(str(tmp_path / "items.pt2")))
    x = torch.randn(4, 4)
    torch.testing.assert_close(loaded(x), program(x))
    assert set(loaded.targets.values["stats"]) == {"last", "pair"}
    torch.testing.assert_close(loaded.targets.values["stats"]["last"], model.stats["last"])
    counted = Counted()
    counted.calls = 5
    program = stitch.export(counted, examples[0][0], examples=examples, dynamic_shapes=ROWS)
    loaded = stitch.load(program.save(str(tmp_path / "counted.pt2")))
    loaded(x), loaded(x)
    assert loaded.targets.values["calls"] == 7
    assert loaded.targets.values["t"] == 1.0 - 0.1 - 0.1


def _double(x):
    return 2 * x


class DispatchTable(nn.Module):
    """A dict of functions read by key (an activation table, Gemma 4's RoPE init functions):
    code, not state; the same objects after every call."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.acts = {"relu": torch.relu, "double": _double, "sig": self.sig, "cls": nn.GELU}
        self.kind = "double"

    def sig(self, x):
        return torch.sigmoid(x)

    def forward(self, x):
        return self.acts[self.kind](self.lin(x)) + self.acts["sig"](x) + self.acts["cls"]()(x)


class SwapsFunction(DispatchTable):
    """Sets an item to a new function object on every call: state, refused naming the dict
    (whatever the function computes, the program would hold the one of the traced call)."""

    def forward(self, x):
        self.acts["last"] = lambda t: t * 2
        return self.acts["last"](self.lin(x))


def test_a_dict_of_functions_is_no_state():
    model = DispatchTable()
    examples = _examples(2, 3, 5)
    plain = torch.export.export(model, examples[0][0], dynamic_shapes=DIM)  # the premise
    program = stitch.export(model, examples[0][0], examples=examples[1:], dynamic_shapes=DIM)
    assert program.report.graphs_after == 1
    for (x,), _ in _examples(4, 7):
        torch.testing.assert_close(program(x), model(x))
        torch.testing.assert_close(plain.module()(x), model(x))


def test_a_function_set_into_a_dict_on_every_call_is_still_state():
    with pytest.raises(stitch.StitchError, match="'acts'"):
        stitch.export(SwapsFunction(), _examples(2)[0][0], examples=_examples(2))


class FunctionList(nn.Module):
    """The same table in another container: a list of functions, picked by index."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.acts = [torch.tanh, _double, nn.GELU]

    def forward(self, x):
        return self.acts[1](self.lin(x)) + self.acts[2]()(self.acts[0](x))


def test_a_list_of_functions_is_no_state():
    model = FunctionList()
    examples = _examples(2, 3, 5)
    program = stitch.export(model, examples[0][0], examples=examples[1:], dynamic_shapes=DIM)
    assert program.report.graphs_after == 1
    for (x,), _ in _examples(4, 7):
        torch.testing.assert_close(program(x), model(x))


def test_a_recorded_dict_refuses_the_forwards_whole_reads_not_torchs():
    """While traced, a dict whose items the forward changes refuses being sized or iterated
    by the model's code (the program would read it as traced); torch's own use passes
    (Dynamo's length guard on a dict a cond's arm names)."""
    import torch._dynamo.guards as dynamo_guards

    from stitch.epilogue.record_items import RecordingDict

    recorded = RecordingDict("global:m.STATS", {"mean": 1.0}, {"mean": "set"}, "m.py:3")
    with pytest.raises(stitch.UnsupportedSideEffectError, match="iterates, sizes or pops"):
        len(recorded)
    with pytest.raises(stitch.UnsupportedSideEffectError, match="iterates, sizes or pops"):
        list(recorded)
    assert dynamo_guards._sequence_length(recorded) == 1
