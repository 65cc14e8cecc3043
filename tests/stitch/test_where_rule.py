"""torch.where computes both arms, torch.logical_and both operands: a branch whose arm, or an
``and``/``or`` whose later operand, can raise on the input its test rules
out (a computed index, integer ``//`` or ``%``, a division with a rounding mode) becomes a
torch.cond, which runs one (stitch/synthesize/convert/where_rule.py)."""

from __future__ import annotations

import ast
import math

import pytest
import torch

import stitch
from stitch.synthesize.convert.where_rule import predication_mode


def _mode(source: str) -> str:
    node = ast.parse(source).body[0]
    return predication_mode(node, [])[0]


@pytest.mark.parametrize("source, mode", [
    ("if t:\n    y = x * 2\nelse:\n    y = x + 1", "where"),
    ("if t:\n    y = x[0]\nelse:\n    y = x[..., :3]", "where"),  # constant indices
    ("if t:\n    y = x[i]\nelse:\n    y = x[0]", "cond"),
    ("if t:\n    y = x[:n]\nelse:\n    y = x", "cond"),
    ("if t:\n    y = x // d\nelse:\n    y = x * 0", "cond"),
    ("if t:\n    y = x % d\nelse:\n    y = x", "cond"),
    ("if t:\n    y = torch.div(x, d, rounding_mode='floor')\nelse:\n    y = x", "cond"),
])
def test_an_arm_that_can_raise_is_not_predicated(source, mode):
    assert _mode(source) == mode


class DividesUnlessZero(torch.nn.Module):
    def forward(self, x, d):
        if d.item() != 0:
            y = x // d
        else:
            y = x * 0
        return y


def test_integer_division_guarded_by_its_test_runs_only_the_taken_arm():
    """As torch.where, the program raised ZeroDivisionError at d=0, where the model
    returns zeros."""
    model = DividesUnlessZero()
    x = torch.tensor([4, 5, 6])
    program = stitch.export(model, (x, torch.tensor(2)), examples=[((x, torch.tensor(-3)), {})])
    for d in (0, 2, 7):
        torch.testing.assert_close(program(x, torch.tensor(d)), model(x, torch.tensor(d)))


class DividesIfNonzero(torch.nn.Module):
    def forward(self, x, d):
        if d.item() != 0 and (x // d).sum() > 3:
            return x * 2
        return x + 1


class DividesUnlessZeroOr(torch.nn.Module):
    def forward(self, x, d):
        if d.item() == 0 or (x // d).sum() > 3:
            return x * 2
        return x + 1


@pytest.mark.parametrize("model", [DividesIfNonzero(), DividesUnlessZeroOr()])
def test_and_or_compute_a_later_operand_only_where_python_would(model):
    """``d != 0 and x // d ...``: torch.logical_and computed both operands, and the program
    raised ZeroDivisionError at d=0 where the model short-circuits."""
    x = torch.tensor([5, 6])
    program = stitch.export(model, (x, torch.tensor(1)), examples=[((x, torch.tensor(100)), {})])
    for d in (0, 1, 100, -1):
        torch.testing.assert_close(program(x, torch.tensor(d)), model(x, torch.tensor(d)))


class IntIfFinite(torch.nn.Module):
    def forward(self, x):
        v = x.sum().item()
        if math.isfinite(v) and int(v) > 2:  # Python never makes int(nan) or int(inf)
            return x * 2
        return x - 1


class IntInAChain(torch.nn.Module):
    def forward(self, x):
        v = x.sum().item()
        if -1e18 < v < int(v) + 1:  # the last operand only where the first test holds
            return x * 2
        return x - 1


class IntInAnArm(torch.nn.Module):
    def forward(self, x):
        v = x.sum().item()
        if math.isfinite(v):  # both arms of a torch.where are computed on every input
            return x * int(v)
        return x - 1


@pytest.mark.parametrize("model", [IntIfFinite(), IntInAChain(), IntInAnArm()])
def test_int_of_a_read_is_made_only_where_python_would(model):
    """``int()`` of a float read raises at NaN and inf, as Python's does: after ``and``, as
    the last operand of a chained comparison and in a branch's arm it is made only where
    the model makes it (it was computed on every input: the program raised ValueError at
    NaN, OverflowError at inf, where the model returns)."""
    x = torch.tensor([1.0, 2.0, 3.0])
    program = stitch.export(model, (x,), examples=[((-x,), {})])
    for v in (float("nan"), float("inf"), float("-inf"), 5.0, -5.0):
        t = torch.tensor([v, 0.0, 0.0])
        want, got = _outcome(model, t), _outcome(program, t)
        if isinstance(want, torch.Tensor):
            torch.testing.assert_close(got, want, equal_nan=True)
        else:  # the chain at inf: Python makes int(inf) too, and raises
            assert got is want is OverflowError, (v, got, want)


def _outcome(f, t):
    try:
        return f(t)
    except Exception as e:  # noqa: BLE001 - compared by class
        return type(e)
