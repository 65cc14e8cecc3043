"""Which spellings of "loop over the selected indices" ``nonzero_loop`` recognises, and what
each element is bound to — pure AST, no tracing: the forms a model written elsewhere uses."""

from __future__ import annotations

import ast

import pytest

from stitch.synthesize.convert.nonzero_loop import _nonzero_arg


@pytest.mark.parametrize("expr, kind", [
    ("m.nonzero()", "row"),
    ("torch.nonzero(m)", "row"),
    ("torch.argwhere(m)", "row"),
    ("m.nonzero(as_tuple=False)", "row"),
    ("m.nonzero().tolist()", "list"),
    ("m.nonzero(as_tuple=True)[0]", "scalar"),
    ("torch.nonzero(m, as_tuple=True)[0]", "scalar"),
    ("torch.where(m)[0]", "scalar"),
    ("m.nonzero().squeeze(-1)", "scalar"),
    ("m.nonzero().squeeze(1)", "scalar"),
    ("m.nonzero().flatten()", "scalar"),
    ("m.nonzero().view(-1)", "scalar"),
    ("torch.where(m)[0].tolist()", "int"),
    ("(counts > 0).nonzero(as_tuple=True)[0].tolist()", "int"),
])
def test_recognised_forms(expr, kind):
    found = _nonzero_arg(ast.parse(expr, mode="eval").body)
    assert found is not None and found[1] == kind


@pytest.mark.parametrize("expr", [
    "m.nonzero(as_tuple=True)",  # a tuple of index vectors, one per dimension
    "torch.where(m, a, b)",  # the three-argument where selects values
    "m.nonzero().squeeze(0)",  # not the index column
    "m.nonzero(as_tuple=flag)",  # unknown until run time
    "m.nonzero()[1]",
    "range(n)",
])
def test_other_forms_are_left_alone(expr):
    assert _nonzero_arg(ast.parse(expr, mode="eval").body) is None
