"""``max``/``min``/``sum``/``len`` of a tensor's ``tolist()`` (``canonicalize/listed_folds``):
the tensor's own reduction while traced, so a list whose length is data fixes nothing; an
empty list raises what Python raises; floats keep the call as written."""

from __future__ import annotations

import ast
import textwrap

import pytest
import torch

import stitch
from stitch.synthesize.canonicalize.listed_folds import listed_folds
from stitch.synthesize.operators.rt_number_calls import listed


class Trim(torch.nn.Module):
    def forward(self, x, lengths):
        longest = max(lengths.tolist())
        shortest = min(lengths.tolist())
        total = sum(lengths.tolist())
        n = len(lengths.tolist())
        return x[:, :longest].sum(-1) * total + shortest - n


def _inputs(b, lengths):
    return torch.arange(b * 6, dtype=torch.float32).reshape(b, 6), \
        torch.tensor(lengths, dtype=torch.int64)


def test_folds_of_a_list_of_data_length_are_one_program_for_every_length():
    model = Trim()
    program = stitch.export(model, _inputs(2, [3, 4]), examples=[(_inputs(3, [2, 5, 1]), {})])
    for b, lengths in ((2, [3, 4]), (3, [2, 5, 1]), (4, [1, 1, 6, 2]), (1, [5])):
        torch.testing.assert_close(program(*_inputs(b, lengths)), model(*_inputs(b, lengths)))
    with pytest.raises(ValueError):  # max() of an empty list, as Python raises it
        program(*_inputs(0, []))


def test_the_operator_is_the_builtin_as_written_where_it_cannot_be_the_reduction():
    ints, floats = torch.tensor([3, 1, 2]), torch.tensor([float("nan"), 1.0])
    assert listed("S", "max", ints) == 3  # eager: the builtin itself
    assert listed("S", "sum", floats) != listed("S", "sum", floats)  # NaN, as Python sums


class FoldInALoop(torch.nn.Module):
    """The fold in a while loop's test, which Dynamo traces: there a builtin compared with
    itself looks like two objects, so the rewrite decides the builtin from the source; the
    list's path would meet torch's stand-in for `max`, which gives the minimum there
    (experiments/repro_max_in_hop.py)."""

    def forward(self, h):
        k = 0
        while max((h > 0).sum(-1).tolist()) > 4 and k < 3:
            h = h - 1.0
            k += 1
        return h


def test_a_fold_in_a_loop_test_is_the_maximum():
    model = FoldInALoop()
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(1)) * 3 + 2
    program = stitch.export(model, (x,))
    for h in (x, x + 1, x - 3):
        torch.testing.assert_close(program(h), model(h))


def test_only_a_builtin_fold_of_a_tolist_is_rewritten():
    func = ast.parse(textwrap.dedent("""
        def f(t, g):
            a = max(t.tolist())
            b = max(t.tolist(), default=0)
            c = g(t.tolist())
            d = sorted(t.tolist())
            e = min(t.tolist())
            return a, b, c, d, e
    """)).body[0]
    ctx = type("Ctx", (), {"label": lambda self, node: f"L{node.lineno}",
                            "site_at": lambda self, node: None,
                            "freevars": frozenset(), "module_globals": {"min": min}})()
    listed_folds(func, ctx)
    text = ast.unparse(func)
    assert "listed('L3', 'max', t)" in text
    assert text.count(".tolist()") == 4  # min is the module's own name there
