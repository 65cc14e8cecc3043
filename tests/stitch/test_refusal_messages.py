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


def test_a_rewritten_while_whose_body_changes_a_carried_shape_says_so():
    """torch's message for a while_loop whose body changes a carry's shape, met by the census
    of a rewritten function: the refusal names the change and what keeps it, not the
    census's advice to report a torch.compile limitation."""
    from stitch.synthesize.convert.round_build import failed_when_run

    torch_says = ("torch.compile failed on example 0 although the model runs eagerly: "
                  "UncapturedHigherOrderOpError: Expected body_fn_output and carried_inputs "
                  "to have same metadata but found: pair[1] differ in 'shape: "
                  "torch.Size([8]) vs torch.Size([4, 8])', where lhs is FakeTensor(...) and "
                  "rhs is FakeTensor(...) from user code:. This is a torch.compile limitation; "
                  "report it with the census of a smaller input, or exclude that example.")
    text, advice = failed_when_run(RuntimeError(torch_says))
    assert "shape: torch.Size([8]) vs torch.Size([4, 8])" in text
    assert "carries one per value" in text and "limitation" not in text
    assert "keep the value's shape" in advice
    other, none = failed_when_run(RuntimeError("torch.compile failed on example 0 although the model "
                                         "runs eagerly: KeyError: 'x'. This is a torch.compile "
                                         "limitation; report it with the census of a smaller "
                                         "input, or exclude that example."))
    assert other.startswith("RuntimeError: ") and "KeyError: 'x'" in other
    assert "report it" not in other and none == ""
