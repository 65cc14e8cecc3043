"""A value that is a tensor on one side of a data-dependent branch and ``None`` on the other
(``continuation.py``, case 4), however the branch is spelled: the rest of the function in
each arm, exact on both sides; and the source analysis that finds such names."""

from __future__ import annotations

import ast
import textwrap

import pytest
import torch
from torch import nn

import stitch
from stitch.synthesize.canonicalize.ifexp_statements import _as_if
from stitch.synthesize.convert.continuation import none_on_one_side


def _first_if(source: str):
    func = ast.parse(textwrap.dedent(source)).body[0]
    return next(n for n in ast.walk(func) if isinstance(n, ast.If)), func


@pytest.mark.parametrize("source, names", [
    # the value before the if reaches the side that does not bind it
    ("""
     def f(h):
         extra = None
         if h.sum() > 0:
             extra = h.mean(0)
         return h if extra is None else h + extra
     """, ["extra"]),
    ("""
     def f(h):
         extra = h.mean(0)
         if h.sum() > 0:
             extra = None
         return h if extra is None else h + extra
     """, ["extra"]),
    # both sides None, or neither: one structure, a cond carries it
    ("""
     def f(h):
         if h.sum() > 0:
             extra = None
         else:
             extra = None
         return h if extra is None else h
     """, []),
    ("""
     def f(h):
         if h.sum() > 0:
             extra = h
         else:
             extra = -h
         return extra
     """, []),
    # not read after the if
    ("""
     def f(h):
         extra = None
         if h.sum() > 0:
             extra = h.mean(0)
         return h
     """, []),
    # inside a loop: the rest of its body does not hold the reads after the loop
    ("""
     def f(h):
         extra = None
         for i in range(2):
             if h.sum() > i:
                 extra = h.mean(0)
         return h if extra is None else h + extra
     """, []),
])
def test_names_none_on_one_side(source, names):
    node, func = _first_if(source)
    assert none_on_one_side(node, func) == names


def test_a_conditional_assignment_becomes_an_if():
    stmt = ast.parse("y = a if t.sum() > 0 else (b if u else None)").body[0]
    assert ast.unparse(_as_if(stmt)) == (
        "if t.sum() > 0:\n    y = a\nelse:\n    y = b if u else None")


class Aux(nn.Module):
    """Spellings of an optional value: a statement, an expression; read through a dict."""

    def __init__(self, spelling: str) -> None:
        super().__init__()
        self.spelling = spelling

    def forward(self, x):
        h = x * 1.5
        if self.spelling == "statement":
            aux = None
            if h.mean() > 0.3:
                aux = h.amax(0)
        else:
            aux = h.mean(0) if h.mean() > 0.3 else None
        out = {"h": h, "aux": aux}
        if out["aux"] is not None:
            out["h"] = out["h"] + aux
        return out["h"]


@pytest.mark.parametrize("spelling", ["statement", "expression"])
def test_optional_values_are_exact_on_both_sides(spelling):
    model = Aux(spelling)
    low, high = torch.full((2, 3), 0.1), torch.full((3, 3), 1.0)
    program = stitch.export(model, (low,), examples=[((high,), {})])
    assert program.report.graphs_after == 1
    assert any("None on one branch only" in d.reason for d in program.report.decisions)
    for x in (low, high, torch.linspace(-1, 1, 12).reshape(4, 3)):
        torch.testing.assert_close(program(x), model(x))
