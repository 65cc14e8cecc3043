"""A dimension exported dynamic is verified at the sizes below its range too: example 0 cut
to 0 and 1 rows (torch.export assumes neither, and its program lets them through with a
silent, different result), where the model accepts them (stitch/verify/size_probes.py). A
different result is refused; a program that raises there is kept, the report saying so."""

from __future__ import annotations

import re

import pytest
import torch

import stitch
from stitch.errors import VerificationError


class OneRowApart(torch.nn.Module):
    """One row is summed and scaled: the model's own size test."""

    def forward(self, x):
        if x.shape[0] == 1:
            return x.sum(0) * 100
        if x.sum() > 0:
            return x.sum(0)
        return x.mean(0)


class RowsAlike(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x.mean(0)
        return x.max(0).values  # raises on 0 rows: the model refuses that size itself


def test_a_program_that_differs_on_one_row_is_refused_naming_the_size():
    with pytest.raises(VerificationError, match=r"cut to x\.shape\[0\] == [01]"):
        stitch.export(OneRowApart(), (torch.ones(3, 2),),
                      examples=[((-torch.ones(5, 2),), {})])


def test_sizes_the_program_computes_alike_are_verified_and_served():
    model = RowsAlike()
    program = stitch.export(model, (torch.ones(3, 2),), examples=[((-torch.ones(5, 2),), {})])
    cut = [c.what for c in program.report.checks if "cut to" in c.what and "forced" not in c.what]
    # 0 rows: the model raises; each example is cut (an arm only one enters)
    assert cut == ["example 0 cut to x.shape[0] == 1", "example 1 cut to x.shape[0] == 1"], cut
    for x in (torch.ones(1, 2), -torch.ones(1, 2), torch.randn(4, 2)):
        torch.testing.assert_close(program(x), model(x))


def test_the_users_own_dynamic_shapes_are_not_probed():
    """A Dim's min cannot be read back from the program: what the user passes is served."""
    batch = torch.export.Dim("batch", min=2)
    program = stitch.export(OneRowApart(), (torch.ones(3, 2),),
                            examples=[((-torch.ones(5, 2),), {})],
                            dynamic_shapes=({0: batch},))
    assert not [c for c in program.report.checks if "cut to" in c.what]


class PairsRows(torch.nn.Module):
    """A size test whose arm traces only for its own side (a reshape into pairs of rows):
    the program the cond on the size gives keeps the guard that the count is even
    (stitch/size_rewrite.py keeps it where it accepts more sizes than torch.export's
    program), so it raises on odd counts, where the model computes."""

    def forward(self, x):
        if x.shape[0] % 2 == 0:
            h = x.reshape(-1, 2, x.shape[1]).sum(1)
        else:
            h = x * 3
        if h.sum() > 0:
            return h + 1
        return h


@pytest.fixture(scope="module")
def pairs_program():
    x = torch.ones(4, 2)
    return stitch.export(PairsRows(), (x,), examples=[((-torch.ones(6, 2),), {})])


def test_sizes_the_program_raises_on_are_noted_not_refused(pairs_program):
    notes = [n for n in pairs_program.report.notes if "refused by the program" in n]
    assert any("x.shape[0] == 1" in n for n in notes), pairs_program.report.notes
    with pytest.raises(AssertionError, match="Guard failed"):
        pairs_program(torch.ones(3, 2))


def test_a_size_test_the_trace_decided_is_named_in_the_report(pairs_program):
    """The program's own size checks beyond the range's lower end (``x.size()[0] % 2 ==
    0``) are a note in the report, and so is the rewrite of the test into a cond on the
    size: the program raises on 5 rows, which the model accepts."""
    notes = [n for n in pairs_program.report.notes if n.startswith("SIZE GUARDS")]
    # the evenness torch writes as ``x % 2 == 0`` or ``(2*x) % 4 == 0``, by its trace
    assert len(notes) == 1 and re.search(r"`\(+(2\*)?x\.size\(\)\[0\]\)? % [24]\) == 0`",
                                         notes[0]), pairs_program.report.notes
    assert "SIZE GUARDS" in str(pairs_program.report)
    # the rewrite of the test into a cond on the size: kept where it accepts more sizes
    # than torch.export's program (here 2 rows), else noted as tried and not kept
    tried = [n for n in pairs_program.report.notes if n.startswith("size tests at")]
    assert len(tried) == 1 and "test_size_probes.py" in tried[0], pairs_program.report.notes
    PairsRows()(torch.ones(5, 2))  # the model accepts 5 rows
    with pytest.raises(Exception, match="Guard failed"):
        pairs_program(torch.ones(5, 2))


class SizeOneInAnArm(torch.nn.Module):
    def forward(self, x, flag):
        if flag.sum() > 0:
            if x.shape[0] > 1:  # the range torch.export gives x.shape[0] decides it: no guard
                return x * 2
            return x * 100
        return x - 1


@pytest.mark.parametrize("flag", [1.0, -1.0])  # only example 1 enters the arm; none does
def test_a_size_test_in_an_arm_example_0_does_not_enter_is_checked_at_cut_sizes(flag):
    """Cutting example 0 alone, which does not enter the arm, would miss that at 1 row
    with the flag on the program returns ``x * 2`` where the model returns ``x * 100``.
    Every example is cut, and each side of each branch is forced on each cut."""
    model = SizeOneInAnArm()
    with pytest.raises(stitch.VerificationError,
                       match=r"cut to x.shape\[0\] == 1 with a branch forced .* S\d+ forced true"):
        stitch.export(model, (torch.ones(6, 3), torch.tensor([-1.0])),
                      examples=[((torch.ones(8, 3), torch.tensor([flag])), {})])


class SizeOneInAnArmOfItsOwnData(torch.nn.Module):
    def forward(self, x):
        if x[:, 1].sum() > 0:  # a cut to 1 row takes the false side, whatever example
            if x.shape[0] > 1:
                return x * 2
            return x * 100
        return x - 1


def test_a_size_test_in_an_arm_no_cut_enters_is_checked_with_the_arm_forced():
    """Each side of each branch is forced on each cut (forced.every_side_runs), taken by an
    example or not: ``[[1., 5., 1.]]`` got ``x * 2`` where the model gives ``x * 100``."""
    def rows(n, sign):
        return sign * (torch.arange(n * 3, dtype=torch.float32).reshape(n, 3) - 1)

    with pytest.raises(stitch.VerificationError,
                       match=r"cut to x.shape\[0\] == 1 with a branch forced .* S\d+ forced true"):
        stitch.export(SizeOneInAnArmOfItsOwnData(), (rows(6, 1),),
                      examples=[((rows(8, -1),), {})])


class CountsEachSide(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stats = {"pos": 0, "neg": 0}

    def forward(self, x):
        if x.sum() > 0:
            self.stats["pos"] += 1
            return x * 2
        self.stats["neg"] += 1
        return x - 1


def test_a_dict_counted_in_each_side_is_verified_on_every_cut():
    """The forced runs are reused on every cut: the dict items a side sets start from the
    model's values each time (they carried over from one cut to the next, and the program
    counted 3 where the model counted 2)."""
    model = CountsEachSide()
    program = stitch.export(model, (torch.rand(6, 3),), examples=[((-torch.rand(8, 3),), {})])
    assert any("forced" in c.what for c in program.report.checks if "cut to" in c.what)
    for x in (torch.rand(1, 3), -torch.rand(5, 3)):
        before = dict(model.stats)
        torch.testing.assert_close(program(x), model(x))
        assert {k: v - before[k] for k, v in model.stats.items()} in (
            {"pos": 2, "neg": 0}, {"pos": 0, "neg": 2})  # the model's call and the program's
