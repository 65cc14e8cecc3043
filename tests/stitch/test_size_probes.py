"""A dimension exported dynamic is verified at the sizes below its range too: example 0 cut
to 0 and 1 rows (torch.export assumes neither, and its program lets them through with a
silent, different result), where the model accepts them (stitch/verify/size_probes.py). A
different result is refused; a program that raises there is kept, the report saying so."""

from __future__ import annotations

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
    cut = [c.what for c in program.report.checks if "cut to" in c.what]
    assert cut == ["example 0 cut to x.shape[0] == 1"], cut  # 0 rows: the model raises
    for x in (torch.ones(1, 2), -torch.ones(1, 2), torch.randn(4, 2)):
        torch.testing.assert_close(program(x), model(x))


def test_the_users_own_dynamic_shapes_are_not_probed():
    """A Dim's min cannot be read back from the program: what the user passes is served."""
    batch = torch.export.Dim("batch", min=2)
    program = stitch.export(OneRowApart(), (torch.ones(3, 2),),
                            examples=[((-torch.ones(5, 2),), {})],
                            dynamic_shapes=({0: batch},))
    assert not [c for c in program.report.checks if "cut to" in c.what]


class NarrowsItsRange(torch.nn.Module):
    """A size test torch.export turns into the range [3, inf): the program raises on 2 rows
    and fewer, with torch's guard, where the model computes."""

    def forward(self, x):
        if x.shape[0] > 2:
            h = x * 2
        else:
            h = x * 3
        if h.sum() > 0:
            return h + 1
        return h


def test_sizes_the_program_raises_on_are_noted_not_refused():
    program = stitch.export(NarrowsItsRange(), (torch.ones(3, 2),),
                            examples=[((-torch.ones(5, 2),), {})])
    notes = [n for n in program.report.notes if "refused by the program" in n]
    assert any("x.shape[0] == 1" in n for n in notes), program.report.notes
    with pytest.raises(AssertionError, match="Guard failed"):
        program(torch.ones(2, 2))


class CutsLongInputs(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] > 4:  # decided by torch.export for the examples' sizes
            x = x[:4]
        if x.sum() > 0:
            return x * 2
        return x - 1


def test_a_size_test_the_trace_decided_is_named_in_the_report():
    """The program's own size checks beyond the range's lower end (``x.size()[0] <= 4``)
    are a note in the report: the program raises on 6 rows, which the model accepts (the
    report said nothing, and called the dimension dynamic)."""
    x = torch.ones(3, 2)
    program = stitch.export(CutsLongInputs(), (x,), examples=[((-x[:2],), {})])
    notes = [n for n in program.report.notes if n.startswith("SIZE GUARDS")]
    assert len(notes) == 1 and "`x.size()[0] <= 4`" in notes[0], program.report.notes
    assert "SIZE GUARDS" in str(program.report)
    CutsLongInputs()(torch.ones(6, 2))  # the model accepts 6 rows
    with pytest.raises(Exception, match="Guard failed"):
        program(torch.ones(6, 2))
