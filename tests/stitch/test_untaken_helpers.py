"""Helpers reached only by a branch no example takes, and helpers reached through a
registry: what transformers' mask helpers need (PaliGemma, transformers 5.23).

- A bool returned by a branch no eager run saw (``return True`` / ``return False`` in a
  helper, inside an arm of another cond): torch.cond 2.14 returns no bool, so it travels as a
  0-d tensor and is read back as a bool (``rt_numbers.Flag``).
- ``None`` among a cond's outputs (both arms): a leafless marker (``rt_numbers.NoValue``).
- A rewritten function called through a dict (``AttentionMaskInterface._global_mapping``,
  ``ALL_ATTENTION_FUNCTIONS``): the registry's entry is swapped too while stitch traces.
"""

from __future__ import annotations

import functools

import pytest
import torch
from torch import nn

import stitch


def skips(mask: torch.Tensor, offset: int) -> bool:
    """transformers' ``_ignore_causal_mask_sdpa`` shape: the examples return at the first
    test; the second, written over several lines, only a branch no example takes reaches."""
    if mask.all():
        return True
    if offset == 0 and (
        mask[:, :2].all() and (~mask[:, 2:]).all()
    ):
        return True
    return False


class Skipping(nn.Module):
    def forward(self, x, mask):
        if skips(mask, 0):
            return x * 2
        return x * mask.float()


def test_a_bool_from_a_branch_no_example_ran_is_carried_and_read_back():
    x = torch.randn(2, 4)
    full = torch.ones(2, 4, dtype=torch.bool)
    model = Skipping()
    program = stitch.export(model, (x, full), examples=[((x + 1, full), {})])
    report = program.report
    assert report.graphs_after == 1 and report.graph_ops.get("cond") == 3, str(report)
    assert not [d for d in report.decisions if d.action.value == "guarded"], str(report)
    prefix = torch.tensor([[True, True, False, False]] * 2)  # the second test's true side
    other = torch.tensor([[True, False, True, False]] * 2)  # both tests false
    for m in (full, prefix, other):
        torch.testing.assert_close(program(x, m), model(x, m))


def passing(fn):
    """A decorator: the caller's rest cannot follow the callee's return through it
    (caller_frames._plain), so the cond itself returns the helper's tuple."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapper


@passing
def pick(h):
    if h.sum() > 0:
        return h * 2, None, True
    return h - 1, None, False


class Picks(nn.Module):
    def forward(self, x):
        h, nothing, flag = pick(x)
        if nothing is not None:
            h = h + nothing
        if flag:
            return h * 3
        return h


def test_none_and_a_bool_among_a_conds_outputs():
    x = torch.randn(2, 4).abs()
    model = Picks()
    program = stitch.export(model, (x,), examples=[((-x,), {})])
    assert program.report.graphs_after == 1, str(program.report)
    for inp in (x, -x, torch.zeros(2, 4)):
        torch.testing.assert_close(program(inp), model(inp))


def scaled(h):
    if h.sum() > 0:
        return h * 2
    return h - 1


FUNCS = {"scaled": scaled}


class Table:
    funcs = {"scaled": scaled}


class ThroughModuleDict(nn.Module):
    def forward(self, x):
        return FUNCS["scaled"](x) + 1


class ThroughClassDict(nn.Module):
    def forward(self, x):
        return Table.funcs["scaled"](x) + 1


@pytest.mark.parametrize("cls", [ThroughModuleDict, ThroughClassDict])
def test_a_function_called_through_a_registry_reaches_its_rewrite(cls):
    x = torch.randn(2, 4).abs()
    model = cls()
    program = stitch.export(model, (x,), examples=[((-x,), {})])
    assert program.report.graphs_after == 1, str(program.report)
    for inp in (x, -x):
        torch.testing.assert_close(program(inp), model(inp))
    assert FUNCS["scaled"] is scaled and Table.funcs["scaled"] is scaled  # put back
