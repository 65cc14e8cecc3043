"""A loop over a tensor's rows around a data-dependent branch, growing a list by one item per
row that is stacked after the loop (``convert/stacked_lists.py``): torch's map over the rows,
one program for every number of rows; lists used any other way keep their appends."""

from __future__ import annotations

import ast
import textwrap

import pytest
import torch

import stitch
from stitch.errors import StitchError
from stitch.synthesize.convert.stacked_lists import stacked_lists


class PerRow(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        outs, norms = [], []
        for row in x.unbind(0):
            if row.sum() > 0:
                outs.append(self.lin(row))
            else:
                outs.append(-row)
            norms.append(row.norm())
        return torch.stack(outs, dim=1), torch.stack(norms)


class PerRowCarrying(torch.nn.Module):
    def forward(self, x):
        outs, total = [], torch.zeros(4)
        for row in x:
            if row.sum() > 0:
                total = total + row
            outs.append(total * 1)
        return torch.stack(outs)


def _rows(n, seed):
    return (torch.randn(n, 4, generator=torch.Generator().manual_seed(seed)),)


def test_rows_of_a_dynamic_batch_mapped_and_stacked_are_one_program():
    model = PerRow()
    program = stitch.export(model, _rows(3, 0), examples=[(_rows(5, 1), {})])
    assert any("map" in d.reason for d in program.report.decisions)
    for n, seed in ((3, 0), (5, 1), (2, 2), (7, 3), (1, 4)):
        for got, want in zip(program(*_rows(n, seed)), model(*_rows(n, seed)), strict=True):
            torch.testing.assert_close(got, want)


def test_a_loop_that_also_carries_a_value_stays_as_written_and_is_refused_at_its_line():
    with pytest.raises(StitchError) as refused:
        stitch.export(PerRowCarrying(), _rows(3, 0), examples=[(_rows(5, 1), {})])
    # unrolled to the traced rows, as torch.export makes it: the guard names the loop
    assert "test_stacked_lists.py:38: for row in x" in str(refused.value)


def _found(source: str) -> set[str]:
    func = ast.parse(textwrap.dedent(source)).body[0]
    loop = next(n for n in ast.walk(func) if isinstance(n, ast.For))
    return set(stacked_lists(loop, func))


def test_only_a_list_grown_once_per_row_and_only_stacked_is_the_loops_output():
    assert _found("""
        def f(x):
            outs = []
            for r in x:
                if r.sum() > 0:
                    outs.append(r)
                else:
                    outs.append(-r)
            return torch.stack(outs, -1)
    """) == {"outs"}
    for body, after in (
            (["if r.sum() > 0:", "    outs.append(r)"], "torch.stack(outs)"),  # one arm
            (["outs.append(r)", "outs.append(r)"], "torch.stack(outs)"),  # twice a row
            (["outs.append(r)"], "torch.cat(outs)"),  # another consumer
            (["outs.append(r)"], "torch.stack(outs), len(outs)"),  # read otherwise
            (["outs.append(r)", "g(outs)"], "torch.stack(outs)"),  # read in the body
    ):
        lines = ["def f(x, g):", "    outs = []", "    for r in x:",
                 *("        " + line for line in body), f"    return {after}"]
        assert _found("\n".join(lines)) == set(), (body, after)
