"""Examples that differ in a dimension make it dynamic (Dim.AUTO) where the user passes no
dynamic_shapes, rather than a static program that refuses the example that differs."""

import pytest
import torch

import stitch
from capture.inputs import Example
from stitch.example_shapes import describe, shapes_from_examples


class TwoInputs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x, pair, scale=1.0):
        a, b = pair
        return self.lin(x).sum(1, keepdim=True) * a.mean() + b.sum() * scale


def _ex(batch, length):
    return Example((torch.randn(batch, 4), (torch.randn(length), torch.randn(3, 2))), {})


def test_dims_that_differ_among_examples_are_dynamic_the_others_static():
    spec = shapes_from_examples(TwoInputs(), [_ex(2, 5), _ex(3, 5), _ex(2, 7)])
    assert set(spec) == {"x", "pair"}  # scale was not passed
    assert spec["x"] == {0: torch.export.Dim.AUTO}
    assert spec["pair"] == ({0: torch.export.Dim.AUTO}, None)
    assert describe(spec) == "x: dim 0; pair: dim 0"
    assert shapes_from_examples(TwoInputs(), [_ex(2, 5), _ex(2, 5)]) is None  # none differ
    assert shapes_from_examples(TwoInputs(), [_ex(2, 5)]) is None


def test_examples_that_cannot_be_lined_up_give_no_spec():
    other = Example((torch.randn(3, 4), [torch.randn(5), torch.randn(3, 2)]), {})  # a list
    assert shapes_from_examples(TwoInputs(), [_ex(2, 5), other]) is None
    rank = Example((torch.randn(3, 4, 1), (torch.randn(5), torch.randn(3, 2))), {})
    assert shapes_from_examples(TwoInputs(), [_ex(2, 5), rank]) is None


class Affine(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x) - 1


class Branching(Affine):
    def forward(self, x):
        h = self.lin(x)
        if h.mean() > 0:  # a graph break rewritten into torch.cond
            return h * 2
        return h - 1


@pytest.mark.parametrize("cls", [Affine, Branching])
def test_a_program_from_examples_of_two_batch_sizes_takes_a_third(cls):
    model = cls().eval()
    x = torch.randn(2, 4)
    program = stitch.export(model, (x,), examples=[((torch.randn(3, 4),), {})])
    assert any("read off the examples" in n for n in program.report.notes)
    for batch in (1, 5, 8):
        a = torch.randn(batch, 4)
        torch.testing.assert_close(program(a), model(a))
    with pytest.raises(Exception, match="x.size()|Guard|size"):  # columns stay static
        program(torch.randn(2, 5))


class PrintsRows(torch.nn.Module):
    def forward(self, x):
        h = x * 2
        print("{!r} rows, {}".format(h.shape[0], str(h.shape[0])), f"{h.shape[0]:>3}")  # noqa: UP032
        if h.mean() > 0:
            print("positive", h.shape[0], f"{h.shape[0]}")
        return h


def test_a_dynamic_size_printed_is_its_value_not_its_symbol(capsys):
    """With the batch dynamic, ``"{!r}".format(h.shape[0])`` and ``str(n)`` must print the
    number, as eager does, not the symbol ("s77"): exported and exact."""
    model = PrintsRows()
    program = stitch.export(model, (torch.randn(2, 4).abs(),),
                            examples=[((-torch.randn(3, 4).abs(),), {})])
    capsys.readouterr()
    for x in (torch.randn(5, 4).abs(), -torch.randn(7, 4).abs()):
        model(x)
        want = capsys.readouterr().out
        program(x)
        assert capsys.readouterr().out == want
    assert "5 rows, 5" in want or "7 rows, 7" in want
