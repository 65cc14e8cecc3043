"""A value a branch in a loop makes a tensor or ``None`` (``Alternatives``), used after the
loop: the rest of the function runs once per structure (``convert/split_rest.py``,
``operators/rt_split.py``); and such a branch nested in another with side effects."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import stitch
from stitch.synthesize.operators.rt_union import Alternatives
from stitch.synthesize.operators.rt_union_fold import flatten


class Halve(nn.Module):
    def forward(self, h):
        return -h * 0.5


class LastPositive(nn.Module):
    """A summary kept from the last layer whose output sums positive, or none, added back
    after the loop (an auxiliary input kept by a condition)."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Identity(), Halve(), nn.Identity(), Halve()])

    def forward(self, x):
        h = x * 1.5
        extra = None
        for layer in self.layers:
            h = layer(h)
            if h.sum() > 0:
                extra = h.mean(0)
        return h if extra is None else h + extra


def test_a_value_none_or_a_tensor_after_a_loop_is_one_exact_graph():
    model = LastPositive()
    first, second = torch.rand(4, 8), -torch.rand(5, 8)  # sides alternate, opposite ways
    program = stitch.export(model, (first,), examples=[((second,), {})])
    assert program.report.graphs_after == 1
    assert any("runs once per structure" in d.reason for d in program.report.decisions)
    for x in (first, second, torch.zeros(2, 8), torch.rand(3, 8) - 0.5, -torch.rand(1, 8)):
        torch.testing.assert_close(program(x), model(x), rtol=0, atol=0)


class Damped:
    """A plain object's method: an adaptive loop that warns, keeping the last mean."""

    def apply(self, h):
        extra = None
        k = 0
        while bool(h.max() > 1.0) and k < 3:
            warnings.warn(f"max={h.max().item():.1f}", stacklevel=1)
            extra = h.mean(0)
            h = h - 1.0
            k += 1
        return h if extra is None else h + extra


class Adaptive(nn.Module):
    def __init__(self):
        super().__init__()
        self.policy = Damped()

    def forward(self, x):
        return self.policy.apply(x * 1.5)


def _run(fn, x):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(x)
    return out, [str(w.message) for w in caught]


def test_none_or_a_tensor_from_a_branch_nested_in_one_with_effects():
    model = Adaptive()
    first, second = torch.rand(4, 8) * 2, torch.rand(3, 8) * 0.5  # 1-2 rounds, and none
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = stitch.export(model, (first,), examples=[((second,), {})])
    assert program.report.graphs_after == 1
    for x in (first, second, torch.rand(2, 8) * 4, torch.zeros(1, 8)):
        out, said = _run(program, x)
        want, eager_said = _run(model, x)
        torch.testing.assert_close(out, want, rtol=0, atol=0)
        assert said == eager_said


@pytest.mark.parametrize("flags, expected", [
    ((True, True), "first"), ((True, False), "first"), ((False, True), "second"),
    ((False, False), None)])
def test_nested_alternatives_fold_into_one_split(flags, expected):
    """Each iteration wraps the last value: the tensors of one shape merge by ``where``,
    ``None`` stays the other structure."""
    first, second = torch.full((3,), 1.0), torch.full((3,), 2.0)
    outer, inner = (torch.tensor(f) for f in flags)
    value = Alternatives(outer, first, Alternatives(inner, second, None))
    folded = flatten(value)
    assert isinstance(folded, Alternatives)
    picked = folded.when_true if bool(folded.flag) else folded.when_false
    if expected is None:
        assert picked is None
    else:
        assert torch.equal(picked, first if expected == "first" else second)
