"""The census names what stops torch.export (the export probe), its counts add up, and a
break seen again from a frame Dynamo skipped is not a second site.

PYTEST_DONT_REWRITE: the models' own ``assert`` statements must reach Dynamo as written
(pytest's rewrite turns them into branches Dynamo breaks at).
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import json

import pytest
import torch
from torch import nn

from capture import BreakKind, explain
from capture.dynamo_breaks import recording_breaks
from capture.explain import public_explain
from capture.export_probe import ProbeOutcome
from capture.sites import FoundBy

X = torch.randn(4, 6, generator=torch.Generator().manual_seed(0))


def line_of(cls, text: str) -> int:
    lines, start = inspect.getsourcelines(cls)
    return start + next(i for i, line in enumerate(lines) if text in line)


class AssertInGraph(nn.Module):
    """Dynamo keeps the assert as an in-graph check; torch.export needs its bool."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("offset", torch.zeros(6))

    def forward(self, x):
        y = torch.tanh(x + self.offset)
        assert (y > -2).all(), "tanh out of range"
        return y * 2


class TwoChecks(nn.Module):
    """Two asserts Dynamo keeps in the graph: export stops at the first, draft_export goes on."""

    def forward(self, x):
        y = torch.tanh(x)
        assert (y > -2).all(), "tanh out of range"
        z = y * 2
        assert z.abs().max() < 10, "doubled out of range"
        return z


class SizeGuard(nn.Module):
    """A masked index (a Dynamo break), then an ``if`` on its size that only export stops at."""

    def forward(self, x):
        picked = x[x > 0]
        if picked.shape[0] > 2:
            return picked.sum()
        return x.sum()


class ItemAsSize(nn.Module):
    """``.item()`` as a size: Dynamo breaks at the same line export stops at."""

    def forward(self, x):
        n = x.sum().long().clamp(1, 4)
        return torch.zeros(int(n))


class Clean(nn.Module):
    def forward(self, x):
        return torch.relu(x) + 1


class CountedLoop(nn.Module):
    """A trip count read from a tensor: one graph per trip count, none before the read."""

    def forward(self, x, n):
        h = x
        for _ in range(int(n.item())):
            h = h * 2
        return h


def test_assert_dynamo_keeps_is_listed_with_line_and_kind():
    model = AssertInGraph()
    before = (model.offset, model.offset.clone())
    census = public_explain(model, (X,))
    assert census.graph_count == 1 and census.break_count == 0, str(census)
    (site,) = census.sites
    assert site.found_by is FoundBy.EXPORT and site.kind is BreakKind.ASSERT
    assert site.lineno == line_of(AssertInGraph, "assert (y > -2)")
    assert site.filename == inspect.getsourcefile(AssertInGraph)
    assert site.function == "AssertInGraph.forward" and site.count == 0
    assert "data-dependent" in site.reason and "torch._check" in site.hint
    assert census.export_probe.outcome is ProbeOutcome.NEW_SITE
    assert census.export_probe.site == site.id and "export_probe" in census.seconds
    assert "only torch.export stops" in str(census) and "0 (export)" in str(census)
    assert model.offset is before[0] and torch.equal(model.offset, before[1])


def test_lines_after_the_first_failure_are_named_by_draft_export():
    census = public_explain(TwoChecks(), (X,))
    first, second = census.sites
    assert [first.lineno, second.lineno] == [line_of(TwoChecks, "assert (y > -2)"),
                                             line_of(TwoChecks, "assert z.abs()")]
    assert {first.kind, second.kind} == {BreakKind.ASSERT}
    assert {first.found_by, second.found_by} == {FoundBy.EXPORT}
    assert census.export_probe.site == first.id and census.export_probe.more == (second.id,)
    assert "draft_export named 1 more" in str(census)


def test_guard_on_data_dependent_size_is_its_own_site():
    census = public_explain(SizeGuard(), (X,))
    dynamo, probe = census.sites
    assert dynamo.found_by is FoundBy.DYNAMO and dynamo.kind is BreakKind.DYNAMIC_SHAPE
    assert dynamo.lineno == line_of(SizeGuard, "picked = x[x > 0]")
    assert probe.found_by is FoundBy.EXPORT and probe.kind is BreakKind.BRANCH
    assert probe.lineno == line_of(SizeGuard, "if picked.shape[0] > 2")
    assert census.break_count == dynamo.count == 1
    # draft_export fails on this model (an unbacked size it cannot place): the probe says so
    assert "draft_export named nothing more" in census.export_probe.draft


def test_export_stopping_at_a_dynamo_site_adds_nothing():
    census = public_explain(ItemAsSize(), (X,))
    (site,) = census.sites
    assert site.found_by is FoundBy.DYNAMO and site.kind is BreakKind.SCALAR_READ
    probe = census.export_probe
    assert probe.outcome is ProbeOutcome.AT_DYNAMO_SITE and probe.site == site.id
    assert probe.location == site.location


def test_clean_model_lists_nothing_extra():
    census = public_explain(Clean(), (X,))
    assert census.sites == () and census.break_count == 0
    assert census.export_probe.outcome is ProbeOutcome.EXPORTED
    assert "torch.export succeeded" in str(census)


def test_probe_is_off_unless_asked():
    census = explain(AssertInGraph(), (X,))  # what stitch.export's rounds call
    assert census.sites == () and census.export_probe is None
    assert "export_probe" not in census.seconds
    data = json.loads(public_explain(AssertInGraph(), (X,)).dumps())
    assert data["sites"][0]["found_by"] == "export"
    assert data["export_probe"]["outcome"] == "new_site"


@pytest.mark.parametrize("trips", [[3], [3, 0]])
def test_summary_counts_agree_for_a_loop_specialised_per_value(trips):
    examples = [((X, torch.tensor(n)), {}) for n in trips]
    census = explain(CountedLoop(), *examples[0][:1], examples=examples[1:])
    (site,) = census.sites
    assert census.graph_count == len(trips)  # one graph per trip count, none before .item()
    assert census.break_count == site.count == 1
    assert str(census).startswith("graph breaks: 1 at 1 site(s)")


# -- a break Dynamo sees again from a frame it skipped (transformers' capture_outputs) ------

_ACTIVE = contextvars.ContextVar("active", default=None)


def recording_outputs(func):
    """Like transformers' ``capture_outputs``: flags read in a dict comprehension, the
    forward called in a ``try``, so a break inside it makes Dynamo skip this frame."""

    @functools.wraps(func)
    def wrapper(self, *args, **kwargs):
        flags = {"hidden_states": True, "attentions": False}
        wanted = {f"output_{k}": kwargs.get(k, getattr(self, k, False)) for k in flags}
        try:
            out = func(self, *args, **kwargs)
        finally:
            wanted.clear()
        return out

    return wrapper


class Experts(nn.Module):
    def forward(self, x):
        hit = torch.nonzero(x > 0)
        return x.sum() + hit.shape[0]


class Wrapped(nn.Module):
    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    @recording_outputs
    def forward(self, x):
        return self.inner(x) * 2


def test_break_seen_from_a_skipped_wrapper_is_counted_once():
    model = Wrapped(Experts())
    torch._dynamo.reset()
    with recording_breaks() as raw:  # the premise: Dynamo does log the wrapper's echo
        torch.compile(model, backend="eager")(X)
    torch._dynamo.reset()
    assert any(r.stack[-1].name == "<dictcomp>" for r in raw)
    census = explain(model, (X,))
    (site,) = census.sites
    assert site.lineno == line_of(Experts, "torch.nonzero") and site.count == 1
    assert census.break_count == 1


def test_wrapper_alone_does_not_break():
    census = explain(Wrapped(Clean()), (X,))
    assert census.sites == () and census.break_count == 0


@pytest.mark.slow
@pytest.mark.hf
def test_transformers_output_capturing_is_not_a_second_site():
    from tests.zoo import hf

    model, args, kwargs, examples = hf.switch()
    census = explain(model, args, kwargs, examples=examples)
    assert census.sites, str(census)
    assert not [s for s in census.sites if "output_capturing" in s.filename], str(census)
    assert census.break_count == sum(s.count for s in census.sites)
