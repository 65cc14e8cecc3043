"""Counters only a branch no example took adds to (``if torch.isnan(h).any(): self.skipped
+= 1``): the examples never change them, so only the source shows them
(``capture/untaken_state.py``). Probed on the examples (no use of them at all), they are
replayed where the branch runs, verified on each forced side of the branch."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import stitch

SKIPS = 0  # a module global only the untaken branch counts in
LAST = None  # a module global only the untaken branch sets
EVENTS = {"nan": 0}  # a module global dict only the untaken branch adds to


class RareEvents(nn.Module):
    hits = 0  # on the class: rows seen with a NaN, by every instance

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.skipped = 0
        self.eps = 1e-5  # a number the forward reads: never a candidate

    def forward(self, x):
        global SKIPS
        h = self.lin(x) + self.eps
        if torch.isnan(h).any():  # no example has a NaN
            self.skipped += 1
            type(self).hits += x.shape[0]
            SKIPS -= 1
            h = torch.nan_to_num(h)
        return h * 2


class ReadsItInTheBranch(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.skipped = 0

    def forward(self, x):
        h = self.lin(x)
        if torch.isnan(h).any():
            self.skipped += 1
            h = torch.nan_to_num(h) * self.skipped  # a read: no counter
        return h


class SetsOnRareEvents(nn.Module):
    last = None  # on the class

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.levels = None  # set by the forward, never read before

    def forward(self, x):
        global LAST
        h = self.lin(x)
        if torch.isnan(h).any():  # no example has a NaN
            self.levels = [h * 0.5, h.mean(0)]
            h = torch.nan_to_num(h) + self.levels[0]  # reads what it set: the arm's local
            type(self).last = (h.sum(), 3)
            LAST = h.amax(0)
        return h * 2


class ItemsOnRareEvents(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.log = {}  # items only the untaken branch sets

    def forward(self, x):
        h = self.lin(x)
        if torch.isnan(h).any():
            EVENTS["nan"] += 1
            self.log["bad"] = h.isnan().sum()
            h = torch.nan_to_num(h)
        return h * 2


class ReadsItsItemInTheBranch(nn.Module):
    """Counts an item on a path no example takes: through ``get`` (an addition), or by
    reading it whole (``whole``: a read the epilogue cannot replay)."""

    def __init__(self, whole: bool = False) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.log = {}
        self.whole = whole

    def forward(self, x):
        h = self.lin(x)
        if torch.isnan(h).any():
            if self.whole:
                self.log["bad"] = self.log["bad"] * 2 + 1
            else:
                self.log["bad"] = self.log.get("bad", 0) + 1
            h = torch.nan_to_num(h)
        return h


class NewItemOnRareEvents(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.stats = {}  # "calls" changes on every call; "bad" only in the untaken branch

    def forward(self, x):
        h = self.lin(x)
        self.stats["calls"] = x.shape[0]
        if torch.isnan(h).any():
            self.stats["bad"] = h.isnan().sum()
            h = torch.nan_to_num(h)
        return h * 2


DIM = ({0: torch.export.Dim("rows", min=2, max=64)},)


@pytest.fixture(autouse=True)
def _fresh():
    global SKIPS, LAST
    saved = RareEvents.hits, SKIPS, SetsOnRareEvents.last, LAST, dict(EVENTS)
    yield
    RareEvents.hits, SKIPS, SetsOnRareEvents.last, LAST, events = saved
    EVENTS.clear(), EVENTS.update(events)


def _export(model):
    torch.manual_seed(0)
    xs = [torch.randn(3, 4), torch.randn(5, 4)]
    return stitch.export(model, (xs[0],), examples=[((x,), {}) for x in xs],
                         dynamic_shapes=DIM), xs


def _nan_rows(rows: int) -> torch.Tensor:
    x = torch.randn(rows, 4)
    x[1, 2] = float("nan")
    return x


def test_counters_only_an_untaken_branch_adds_to_are_replayed_when_it_runs():
    global SKIPS
    torch.manual_seed(1)
    model = RareEvents()
    program, xs = _export(model)
    adds = {e.options["target"].rpartition(".")[2]: e.guard for e in program.epilogue.entries
            if e.kind == "add"}
    assert set(adds) == {"skipped", "hits", "SKIPS"} and None not in adds.values()
    assert (model.skipped, RareEvents.hits, SKIPS) == (0, 0, 0)
    inputs = [xs[0], _nan_rows(4), _nan_rows(6), xs[1]]
    for x in inputs:
        program(x)
    replayed = model.skipped, RareEvents.hits, SKIPS
    RareEvents.hits, SKIPS = 0, 0
    eager = RareEvents()
    eager.load_state_dict(model.state_dict())
    for x in inputs:
        eager(x)
    assert replayed == (eager.skipped, RareEvents.hits, SKIPS) == (2, 10, -2)


@pytest.mark.parametrize(("dropped", "model"), [("add", RareEvents),
                                               ("rebind", SetsOnRareEvents),
                                               ("set_item", ItemsOnRareEvents)])
def test_a_dropped_untaken_replay_is_caught_on_the_forced_side(drop_guarded_replays, dropped,
                                                               model):
    """Sabotage: the epilogue skips the guarded additions (sets); only the branch's forced
    side runs them, and its verification refuses."""
    drop_guarded_replays(dropped)
    torch.manual_seed(1)
    with pytest.raises(stitch.VerificationError, match="forced true"):
        _export(model())


def test_an_untaken_counter_the_branch_also_reads_is_refused():
    torch.manual_seed(1)
    with pytest.raises(stitch.StitchError, match=r"test_untaken_state.py:\d+: only a path "
                                                 r"no example took adds to 'skipped'"):
        _export(ReadsItInTheBranch())


def test_state_only_an_untaken_branch_sets_is_set_when_it_runs():
    global LAST
    torch.manual_seed(1)
    model = SetsOnRareEvents()
    program, xs = _export(model)
    rebinds = {e.options["target"].rpartition(".")[2]: e.guard
               for e in program.epilogue.entries if e.kind == "rebind"}
    assert set(rebinds) == {"levels", "last", "LAST"} and None not in rebinds.values()
    inputs = [xs[0], _nan_rows(4), xs[1], _nan_rows(6), xs[0]]
    replayed = []
    for x in inputs:
        program(x)
        replayed.append((model.levels, SetsOnRareEvents.last, LAST))
    SetsOnRareEvents.last, LAST = None, None
    eager = SetsOnRareEvents()
    eager.load_state_dict(model.state_dict())
    for x, got in zip(inputs, replayed, strict=True):
        eager(x)
        torch.testing.assert_close(got, (eager.levels, SetsOnRareEvents.last, LAST),
                                   equal_nan=True)
    assert replayed[0] == (None, None, None) and replayed[-1][0][0].shape == (6, 4)


def test_dict_items_only_an_untaken_branch_changes_are_replayed_when_it_runs():
    torch.manual_seed(1)
    model = ItemsOnRareEvents()
    program, xs = _export(model)
    entries = {(e.kind, e.options["key"]) for e in program.epilogue.entries
               if e.guard is not None}
    assert entries == {("add", "nan"), ("set_item", "bad")}
    inputs = [xs[0], _nan_rows(4), _nan_rows(3), xs[1]]
    for x in inputs:
        program(x)
    replayed = dict(EVENTS), dict(model.log)
    EVENTS["nan"] = 0
    eager = ItemsOnRareEvents()
    eager.load_state_dict(model.state_dict())
    for x in inputs:
        eager(x)
    assert replayed[0] == EVENTS == {"nan": 2}
    torch.testing.assert_close(replayed[1], eager.log)


def test_an_untaken_dict_item_counted_through_get_is_replayed_from_the_default():
    """``log["bad"] = log.get("bad", 0) + 1`` on a path no example took: an addition to the
    item, starting from ``get``'s default where the item is missing, as eager counts."""
    torch.manual_seed(1)
    model = ReadsItsItemInTheBranch()
    program, xs = _export(model)
    assert model.log == {}
    inputs = [xs[0], _nan_rows(4), _nan_rows(3), xs[1]]
    got = [program(x) for x in inputs]  # the program counts into the model's dict
    replayed = dict(model.log)
    model.log.clear()
    torch.testing.assert_close(got, [model(x) for x in inputs])
    assert replayed == model.log == {"bad": 2}


def test_an_untaken_dict_a_branch_reads_is_refused():
    torch.manual_seed(1)
    with pytest.raises(stitch.StitchError, match="log"):
        _export(ReadsItsItemInTheBranch(whole=True))


def test_a_new_item_only_an_untaken_branch_sets_in_a_dict_the_examples_change():
    torch.manual_seed(1)
    model = NewItemOnRareEvents()
    program, xs = _export(model)
    keys = {(e.kind, e.options["key"], e.guard is not None) for e in program.epilogue.entries}
    assert keys == {("set_item", "calls", False), ("set_item", "bad", True)}
    inputs = [xs[0], _nan_rows(4), xs[1]]
    for x in inputs:
        program(x)
    eager = NewItemOnRareEvents()
    eager.load_state_dict(model.state_dict())
    for x in inputs:
        eager(x)
    torch.testing.assert_close(model.stats, eager.stats)
    assert set(model.stats) == {"calls", "bad"}


class _Head(nn.Module):
    """A head defined beside the model, as transformers defines classification heads: its
    forward sets state in a branch (``config.problem_type``)."""

    def __init__(self) -> None:
        super().__init__()
        self.problem = None

    def forward(self, x):
        if self.problem is None:
            self.problem_kind = "regression"
        return x


class _Body(nn.Module):
    def forward(self, x):
        return x * 2


def test_set_names_are_the_models_own_forwards():
    from capture.untaken_state import set_names

    # another class's forward in the same file is not this model's
    assert "problem_kind" not in set_names(_Body())
    assert "problem_kind" in set_names(nn.Sequential(_Body(), _Head()))



class Codes:
    """Reachable from the module's globals, as a library's status codes are (httpx sets
    ``codes.found = 302``); ``found`` is also a local counter in the model's file."""

    found = 302


class CountsLocally(RareEvents):
    def forward(self, x):
        found = 0
        for _ in range(x.shape[0]):
            found += 1  # a local: no state
        return super().forward(x) * int(found > 0 and Codes.found > 0)


def test_a_local_counter_makes_no_candidate_of_a_class_attribute_named_alike():
    from capture.reachable import reachable_slots
    from capture.untaken_state import candidates

    model = CountsLocally()
    slots = reachable_slots(model)
    assert any(s.target.endswith("Codes.found") for s in slots), "the class is reachable"
    found = candidates(model, slots, set())
    # the model's own counters still are (an attribute, a class attribute, a global)
    assert "skipped" in found and any(t.endswith("RareEvents.hits") for t in found)
    assert any(t.endswith(".SKIPS") for t in found)
    assert not [t for t in found if "Codes" in t]
