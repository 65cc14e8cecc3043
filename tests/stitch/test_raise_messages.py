"""``if <data>: raise E(f"... {t.item():.2f}")``: a message that formats a scalar read is a
runtime check like any other; the read is never made while traced (it would break the
graph), so the program's message is the expression's source text, its type the model's."""

from __future__ import annotations

import warnings

import pytest
import torch

import stitch


class Validates(torch.nn.Module):
    def forward(self, x):
        if (x < -10).any():
            raise ValueError(f"input too small: {x.min().item():.2f}")
        return x * 2


def test_a_formatted_read_in_a_raise_is_a_check():
    model = Validates()
    program = stitch.export(model, (torch.randn(2, 4),), examples=[((torch.randn(3, 4),), {})])
    assert program.report.graph_ops.get("assert", 0) >= 1, str(program.report)
    x = torch.randn(5, 4)
    torch.testing.assert_close(program(x), model(x))
    bad = torch.full((2, 4), -20.0)
    with pytest.raises(ValueError, match="input too small"):
        model(bad)
    with pytest.raises(ValueError, match="input too small"):
        program(bad)


class WarnsThenRaises(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x)
        if torch.isnan(h).any():
            warnings.warn(f"nan in {h.shape[0]} rows", stacklevel=2)
            raise ValueError(f"input rejected: {h.shape[0]} rows")
        return h * 2


def test_effects_before_a_raise_are_a_cond_and_the_raise_a_check():
    torch.manual_seed(0)
    model = WarnsThenRaises()
    program = stitch.export(model, (torch.randn(2, 4),), examples=[((torch.randn(3, 4),), {})])
    ops = program.report.graph_ops
    assert ops.get("cond", 0) >= 1 and ops.get("assert", 0) >= 1, str(program.report)
    for rows in (1, 2, 5):
        x = torch.randn(rows, 4)
        torch.testing.assert_close(program(x), model(x))
    bad = torch.full((2, 4), float("nan"))
    with pytest.raises(ValueError, match="input rejected"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model(bad)
    with pytest.raises(ValueError, match="input rejected"):
        program(bad)


class NotThenRaises(torch.nn.Module):
    """Effects before a raise whose test is ``not`` of a tensor comparison: the test is taken
    once as a tensor (Python's ``not`` would read its truth while traced)."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def forward(self, x):
        h = x * 1.5
        if not h.mean() > 0:
            self.seen.append(h.sum())
            raise ValueError(f"input rejected: {h.shape[0]} rows")
        return h * 2.0 + h.sum()


def test_a_negated_test_before_effects_and_a_raise():
    model = NotThenRaises()
    program = stitch.export(model, (torch.rand(2, 3) + 0.1,),
                            examples=[((torch.rand(3, 3) + 0.2,), {})])
    assert program.report.graphs_after == 1
    x = torch.rand(4, 3)
    torch.testing.assert_close(program(x), model(x))
    with pytest.raises(ValueError, match="input rejected"):
        program(-torch.ones(2, 3))


class ValidatesInAChain(torch.nn.Module):
    def forward(self, x):
        if torch.isnan(x).any():
            raise ValueError(f"NaN in input ({int(torch.isnan(x).sum())} values)")
        elif (x.abs() > 100).any():
            raise ValueError("input out of range")
        else:
            y = x.relu()
        return y


def test_raises_in_an_elif_chain_are_checks():
    """``if a: raise ... elif b: raise ... else: S``: each test its own check and ``S`` the
    statements after them (``canonicalize/raise_else.py``). It was one branch whose arms
    only raise: refused, "neither branch assigns anything"."""
    t = torch.tensor
    model = ValidatesInAChain()
    program = stitch.export(model, (t([1.0, -2.0]),), examples=[((t([3.0, 4.0, 5.0]),), {})])
    assert program.report.graph_ops.get("assert", 0) >= 2, str(program.report)
    torch.testing.assert_close(program(t([0.5, -7.0])), model(t([0.5, -7.0])))
    for bad, message in ((t([1.0, float("nan")]), "NaN in input"),
                         (t([1.0, 500.0]), "out of range")):
        with pytest.raises(ValueError, match=message):
            model(bad)
        with pytest.raises(ValueError, match=message):
            program(bad)
