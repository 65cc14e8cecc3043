"""A refusal says why a break was not rewritten and what the user can change, for the form
the test is written in (stitch/refusals.py), never the census's "stitch.export turns it
into torch.cond" beside a refusal of that very branch."""

from __future__ import annotations

import pytest
import torch

import stitch


class FiltersRows(torch.nn.Module):
    def forward(self, x):
        rows = [r for r in x if r.sum() > 0]  # the filter line
        return torch.stack(rows).sum(0) if rows else x[0]


def test_a_comprehension_filtered_on_data_is_refused_saying_why_and_what_to_write():
    x = torch.randn(4, 3)
    with pytest.raises(stitch.UnfixableBreaksError) as refused:
        stitch.export(FiltersRows(), (x,), examples=[((-x,), {})])
    text = str(refused.value)
    line = next(i for i, ln in enumerate(open(__file__), 1) if "# the filter line" in ln)
    assert f"{__file__}:{line} [branch]" in text, text
    assert "the test filters a comprehension" in text
    assert "torch.where(keep[:, None], x, 0)" in text
    assert "turns it into" not in text and "no rewrite for this kind" not in text


class Out:
    """A plain class holding a tensor (not a dataclass: stitch does not register it)."""

    def __init__(self, y: torch.Tensor) -> None:
        self.y = y


class ReturnsARecord(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            x = x * 2
        return Out(x)


def test_an_unregistered_class_output_is_refused_saying_how_to_register_it():
    x = torch.randn(4)
    with pytest.raises(stitch.ExportFailedError,
                       match=r"register_pytree_node\(Out, \.\.\.\)\), make it a dataclass"):
        stitch.export(ReturnsARecord(), (x,), examples=[((-x,), {})])
    torch.utils._pytree.register_pytree_node(  # what it says to do
        Out, lambda o: ([o.y], None), lambda ys, _: Out(*ys))
    try:
        program = stitch.export(ReturnsARecord(), (x,), examples=[((-x,), {})])
        for a in (x, -x, x * 3):
            torch.testing.assert_close(program(a).y, ReturnsARecord()(a).y)
    finally:
        torch.utils._pytree._deregister_pytree_node(Out)


class BreaksBySize(torch.nn.Module):
    def forward(self, x):
        for _ in range(3):
            x = x * 0.9
            if x.shape[0] > 3:  # the size test line
                x = x.sum(0)
                break
        return x


def test_a_failed_guard_names_the_line_torch_export_made_it_at():
    """A size test torch.export decided that stitch cannot make a cond (its sides leave the
    loop with tensors of other ranks): the program fails its guard on the other example;
    the refusal names the user's line."""
    with pytest.raises(stitch.VerificationError) as refused:
        stitch.export(BreaksBySize(), (torch.randn(4, 3),), examples=[((torch.randn(2, 3),), {})])
    text = str(refused.value)
    line = next(i for i, ln in enumerate(open(__file__), 1) if "# the size test line" in ln)
    assert "Guard failed" in text
    assert f"torch.export made the program's input guards at:\n  {__file__}:{line}:" in text, text


class TableBuffer(torch.nn.Module):
    """A table rebuilt for the input's size and kept in a registered buffer (timm's ConViT
    keeps ``rel_indices`` so): torch.export writes it back in place, at the shape it had."""

    def __init__(self, registered: bool = True):
        super().__init__()
        if registered:
            self.register_buffer("table", torch.zeros(1, 1, 1), persistent=False)
        else:
            self.table = torch.zeros(1, 1, 1)

    def forward(self, x):
        n = x.shape[-1]
        if self.table.shape[1] != n:
            self.table = torch.arange(n * n, dtype=torch.float).reshape(1, n, n)  # SETS
        return x @ self.table[0]


def test_a_buffer_set_to_another_shape_is_refused_naming_the_line_and_the_ways_out():
    import inspect

    lines, start = inspect.getsourcelines(TableBuffer)
    line = start + next(i for i, text in enumerate(lines) if "# SETS" in text)
    examples = [((torch.randn(2, 4),), {})]
    with pytest.raises(stitch.VerificationError) as refused:
        stitch.export(TableBuffer(), (torch.randn(1, 4),), examples=examples)
    message = str(refused.value)
    assert "sets buffer table to a tensor of another shape" in message, message
    assert f"{__file__}:{line}" in message, message
    assert "(1, 4, 4)" in message and "(1, 1, 1)" in message, message
    # the first way out it names: a plain attribute, recomputed as a cache
    model = TableBuffer(registered=False)
    program = stitch.export(model, (torch.randn(1, 4),), examples=examples)
    x = torch.randn(3, 4)
    torch.testing.assert_close(program(x), TableBuffer(registered=False)(x))
