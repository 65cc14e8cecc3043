"""``and``/``or``/``not`` and chained comparisons used as values on a break's line
(synthesize/canonicalize/bool_values.py): the tensor-aware operators where every operand is a
truth value, the expression as written otherwise; and a loop counted by such a value, exact."""

from __future__ import annotations

import ast

import pytest
import torch

import stitch
from stitch.synthesize.canonicalize.bool_values import truth_values


@pytest.mark.parametrize("source, made", [
    ("1 + int(a > 0 and b.item() < 3)", "logical_and"),
    ("int(a > 0 or not b)", "logical_or"),
    ("int(not bool(a))", "logical_not"),
    ("int(0 < a.item() < 1)", "compare_chain"),
    ("[x > 0 and y > 0 for x in z]", "logical_and"),
])
def test_truth_values_become_operators(source, made):
    out = ast.unparse(truth_values(ast.parse(source, mode="eval").body))
    assert f"__stitch_rt__.{made}(" in out


@pytest.mark.parametrize("source", [
    "a > 0 and h",  # an operand that is no truth value: its value is the result
    "a or b",
    "not h",
    "a < b",
])
def test_other_values_stay_as_written(source):
    tree = ast.parse(source, mode="eval").body
    assert ast.unparse(truth_values(tree)) == source


class Passes(torch.nn.Module):
    def forward(self, x):
        h = x * 1.5
        for i in range(1 + int(h.sum() > 0 and h.max().item() < 3.0)
                       + int(0 < h.mean().item() < 1) + int(not bool(h.min() > 0))):
            print(f"pass {i}: {h.mean().item():.3f}")
            h = h - 0.25
        return h


def test_a_count_made_of_truth_values_is_exact(capsys):
    program = stitch.export(Passes(), (torch.full((2, 3), 0.5),),
                            examples=[((torch.full((3, 3), -1.0),), {})])
    assert program.report.graphs_after == 1
    for x in (torch.full((2, 3), 0.5), torch.full((4, 3), 5.0), torch.linspace(-1, 1, 6)
              .reshape(2, 3), torch.full((1, 3), 0.1)):
        capsys.readouterr()
        expected = Passes()(x)
        text = capsys.readouterr().out
        torch.testing.assert_close(program(x), expected)
        assert capsys.readouterr().out == text


@pytest.mark.timeout(120)
def test_and_of_a_size_and_a_tensor_in_a_while_loop_keeps_both_operands():
    """Inside a while_loop's cond traced by Dynamo, ``bool()`` of a size test can stay
    symbolic: the size's truth must not end ``and`` as if it were false (the loop would
    test the size alone and never stop)."""
    from stitch.synthesize.operators import runtime as rt

    def f(x):
        def test(k, h):
            return rt.pred(rt.logical_and(lambda: h.shape[0] > 3, lambda: k < 3))

        def body(k, h):
            k = rt.own(k)
            k += 1
            return k, h - 1.0

        k, h = rt.while_true("S1", test, body, (0, x))
        return h * (k + 1)

    x = torch.randn(4, 8)
    torch.testing.assert_close(torch.compile(f, backend="eager", dynamic=True)(x), (x - 3.0) * 4)
