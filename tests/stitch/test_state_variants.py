"""Containers of other kinds that a data-dependent branch changes (a Counter, a dict subclass
with an attribute, a defaultdict, an OrderedDict reordered, a set, a generator advanced,
a list inside a dict): stitch replays the change exactly or refuses; it never returns a
program that drops it. Each case compares the state the model leaves with the state the
program leaves, on inputs taking either side."""

from __future__ import annotations

import collections

import pytest
import torch

import stitch


class Tagged(dict):
    """A dict subclass that also holds an attribute."""


COUNTS = collections.Counter()
TAGGED = Tagged()
TAGGED.seen = 0
BY_KEY = collections.defaultdict(list)
ORDER = collections.OrderedDict(a=1, b=2)
SEEN = set()
NESTED = {"a": {"b": []}}


def _ticks():
    i = 0
    while True:
        i += 1
        yield i


TICKS = _ticks()


def _state():
    return (dict(COUNTS), dict(TAGGED), TAGGED.seen, {k: list(v) for k, v in BY_KEY.items()},
            list(ORDER), set(SEEN), repr(NESTED))


class _Branchy(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(3, 3, bias=False)  # -x takes the other side


class CountsInACounter(_Branchy):
    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0:
            COUNTS["positive"] += 1
            return h * 2
        return h - 1


class SetsASubclassAttribute(_Branchy):
    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0:
            TAGGED.seen += 1
            return h * 2
        return h - 1


class AppendsInADefaultdict(_Branchy):
    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0:
            BY_KEY["positive"].append(1)
            return h * 2
        return h - 1


class ReordersAnOrderedDict(_Branchy):
    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0:
            ORDER.move_to_end("a")
            return h * 2
        return h - 1


class AddsToASet(_Branchy):
    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0:
            SEEN.add(len(SEEN))
            return h * 2
        return h - 1


class AdvancesAGenerator(_Branchy):
    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0:
            return h * 2 + next(TICKS)
        return h - 1


class AppendsInANestedDict(_Branchy):
    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0:
            NESTED["a"]["b"].append(1)
            return h * 2
        return h - 1


def _restore(snapshot):
    counts, tagged, seen, by_key, order, members, nested = snapshot
    COUNTS.clear()
    COUNTS.update(counts)
    TAGGED.clear()
    TAGGED.update(tagged)
    TAGGED.seen = seen
    BY_KEY.clear()
    BY_KEY.update({k: list(v) for k, v in by_key.items()})
    for key in order:
        ORDER.move_to_end(key)
    SEEN.clear()
    SEEN.update(members)
    NESTED["a"]["b"][:] = eval(nested)["a"]["b"]  # noqa: S307 - our own repr of ints


@pytest.mark.parametrize("model_type", [
    CountsInACounter, SetsASubclassAttribute, AppendsInADefaultdict, ReordersAnOrderedDict,
    AddsToASet, AdvancesAGenerator, AppendsInANestedDict])
def test_a_container_a_branch_changes_is_replayed_or_refused(model_type):
    model = model_type()
    xs = [torch.randn(4, 3, generator=torch.Generator().manual_seed(s)) for s in (1, 2)]
    with torch.no_grad():
        pos = [x if model.lin(x).sum() > 0 else -x for x in xs]
    try:
        program = stitch.export(model, (pos[0],), examples=[((-pos[0],), {})])
    except stitch.StitchError as refusal:  # refused: says where, and returns nothing
        assert "test_state_variants" in str(refusal), str(refusal)
        return
    for x, taken in ((pos[1], True), (-pos[1], False)):
        before = _state()
        with torch.no_grad():
            want = model(x)
        after_model = _state()
        _restore(before)
        with torch.no_grad():
            got = program(x)
        assert _state() == after_model, "the program left other state than the model"
        # a generator cannot be put back: the program's call draws the next value
        ticked = taken and model_type is AdvancesAGenerator
        torch.testing.assert_close(got, want + (1 if ticked else 0))
