"""Outputs whose structure follows the data (``operators/rt_union.py``): a branch that
gives a value a tensor of another rank on each side, or ``None`` on one side only, returned
from the forward. The program carries both sides and a flag; the value the model returned
is rebuilt after the graph, on every side, and through a saved artifact."""

from __future__ import annotations

import ast
import textwrap

import pytest
import torch
import torch.utils._pytree as pytree
from torch import nn

import stitch
from stitch.synthesize.analysis.none_values import may_give_none
from stitch.synthesize.convert.cond_keywords import carried_to_outputs
from stitch.synthesize.operators.rt_union import (
    Alternatives,
    DataShapedValueError,
    differing,
    resolve,
)


class OptionalAux(nn.Module):
    """A dict output whose field is a tensor or None by data."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        h = self.lin(x)
        aux = h.mean() if h.mean() > 0.3 else None
        return {"out": h.relu(), "aux": aux}


class RankByData(nn.Module):
    """The returned tensor's rank depends on the data."""

    def forward(self, x):
        h = x * 1.5
        if h.sum() > 0:
            h = h.sum(0)
        else:
            h = h - 1.0
        return h


class RankUsedAfter(nn.Module):
    """The value of another rank is used after the branch: the rest of the function goes
    into each arm, and the return carries both."""

    def forward(self, x):
        h = x * 1.5
        if h.sum() > 0:
            h = h.sum(0)
        else:
            h = h - 1.0
        y = h * 2
        return y + 1


def _reduced(h):
    if h.sum() > 0:
        h = h.sum(0)
    return h


class ReturnedByHelper(nn.Module):
    """The branch in a helper whose value the forward returns as it is."""

    def forward(self, x):
        return _reduced(x * 1.5)


class UsedByCaller(nn.Module):
    """The helper's value used by its caller: the caller's rest goes into each arm."""

    def forward(self, x):
        h = _reduced(x * 1.5)
        return h * 2


def _same(a, b) -> bool:
    la, sa = pytree.tree_flatten(a)
    lb, sb = pytree.tree_flatten(b)
    return sa == sb and all(
        (x is None and y is None) or (isinstance(x, torch.Tensor) and x.shape == y.shape
                                      and torch.allclose(x, y, atol=1e-5))
        for x, y in zip(la, lb, strict=True))


def _inputs_both_sides(model):
    candidates = [torch.randn(4, 8, generator=torch.Generator().manual_seed(s)) + shift
                  for s, shift in ((0, 3.0), (1, -3.0), (2, 0.0), (3, 5.0), (4, -5.0))]
    return candidates


@pytest.mark.parametrize("model_type", [
    OptionalAux, RankByData, RankUsedAfter, ReturnedByHelper, UsedByCaller])
def test_structure_by_data_exact_on_both_sides(model_type):
    torch.manual_seed(0)
    model = model_type()
    xs = _inputs_both_sides(model)
    program = stitch.export(model, (xs[0],), examples=[((xs[1],), {})])
    kinds = set()
    with torch.no_grad():
        for x in xs:
            want = model(x)
            got = program(x)
            assert _same(got, want), (got, want)
            kinds.add(str(pytree.tree_flatten(want)[1]) + str([
                t.dim() for t in pytree.tree_leaves(want) if isinstance(t, torch.Tensor)]))
    assert len(kinds) == 2  # both structures were returned and compared
    # the graph alone returns the carried form: both sides and a flag
    raw, _extras = program.module()(xs[0])
    assert any(isinstance(v, Alternatives) for v in pytree.tree_leaves(
        raw, is_leaf=lambda v: isinstance(v, Alternatives)))
    assert _same(resolve(raw), model(xs[0]))


@pytest.mark.slow
def test_structure_by_data_through_a_saved_artifact(tmp_path):
    torch.manual_seed(0)
    model = OptionalAux()
    xs = _inputs_both_sides(model)
    program = stitch.export(model, (xs[0],), examples=[((xs[1],), {})])
    loaded = stitch.load(program.save(str(tmp_path / "aux.pt2")))
    with torch.no_grad():
        for x in xs:
            assert _same(loaded(x), model(x))


def test_alternatives_used_inside_the_program_refuse_with_the_line():
    value = Alternatives(torch.tensor(True), torch.ones(3), None)
    here = f"{__file__}:"
    with pytest.raises(DataShapedValueError, match=here):
        value + 1
    with pytest.raises(DataShapedValueError, match="different structure on each side"):
        bool(value)
    with pytest.raises(DataShapedValueError):
        value * torch.ones(3)
    with pytest.raises(DataShapedValueError, match=here):  # a tensor's method or attribute
        value.sum()
    with pytest.raises(DataShapedValueError, match=here):
        _ = value.shape
    with pytest.raises(DataShapedValueError, match=here):  # a torch function given it
        torch.isnan(value)
    with pytest.raises(DataShapedValueError, match=here):
        torch.cat([torch.ones(1), value])
    assert value.when_true.shape == (3,) and value._fields[0] == "flag"  # its own stay
    assert not hasattr(value, "numel")  # code probing what a value is gets an answer


def test_alternatives_is_a_pytree_node_that_round_trips():
    value = {"a": Alternatives(torch.tensor(False), torch.ones(2), (torch.zeros(1), None))}
    leaves, spec = pytree.tree_flatten(value)
    assert len(leaves) == 4  # the flag, the true side's tensor, the false side's two leaves
    again = pytree.tree_unflatten(leaves, pytree.treespec_loads(pytree.treespec_dumps(spec)))
    picked = resolve(again)
    assert picked["a"][1] is None and torch.equal(picked["a"][0], torch.zeros(1))


@pytest.mark.parametrize("t, f, positions", [
    ((torch.ones(2, 3),), (torch.ones(3),), (0,)),  # rank
    ((torch.ones(2),), (torch.ones(2, dtype=torch.int64),), (0,)),  # dtype
    ((torch.ones(2),), (None,), (0,)),  # None on one side
    ((torch.ones(2), torch.ones(1)), (torch.ones(5), None), (1,)),  # sizes alone agree
    ((torch.ones(2),), (torch.ones(7),), ()),  # sizes differ only: torch.cond takes it
    ((1,), (torch.ones(1),), ()),  # a number: left to torch.cond's own refusal
])
def test_differing_positions(t, f, positions):
    assert differing(t, f) == positions


@pytest.mark.parametrize("source, expected", [
    ("x = None", True),
    ("return None", True),
    ("return", True),
    ("out = {'a': h, 'b': None}", True),
    ("out = (h, None)", True),
    ("x = h if c else None", False),  # an expression: canonicalized to an if before this
    ("x = h", False),
    ("def g():\n    return None", False),  # another scope
])
def test_may_give_none(source, expected):
    body = ast.parse(textwrap.dedent(source) if not source.startswith("return") else
                     f"def f():\n    {source}").body
    if source.startswith("return"):
        body = body[0].body
    assert may_give_none(body) is expected


@pytest.mark.parametrize("source, expected", [
    ("if c:\n    h = h.sum(0)\nreturn h", True),
    ("if c:\n    h = h.sum(0)\nreturn {'h': h, 'n': (h, 1)}", True),
    ("if c:\n    h = h.sum(0)\ny = h * 2\nreturn y", False),  # the rest goes into the arms
    ("if c:\n    h = h.sum(0)\nh = h + 1\nreturn h", False),
    ("if c:\n    h = h.sum(0)\nreturn h.mean()", False),
    ("if d:\n    if c:\n        h = h.sum(0)\nreturn h", False),  # under another if
    ("for i in r:\n    if c:\n        h = h.sum(0)\nreturn h", True),  # no arm takes a loop's rest
    ("if c:\n    h['a'] = d\nelse:\n    h['b'] = d\nreturn h", False),  # a container filled
])
def test_carried_to_outputs(source, expected):
    func = ast.parse("def f(h, c, d, r):\n" + textwrap.indent(source, "    ")).body[0]
    branch = next(n for n in ast.walk(func) if isinstance(n, ast.If) and
                  isinstance(n.test, ast.Name) and n.test.id == "c")
    assert carried_to_outputs(func, branch, ["h"]) is expected
