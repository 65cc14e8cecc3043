"""Deferred calls see the values of their moment, and their text is eager's exactly: a
tensor written in place after a print is copied at the print (only then); format specs,
``str.format``, ``%s`` and ``!r`` over tensors and scalar reads are formatted in the
epilogue."""

from __future__ import annotations

import contextlib
import io
import logging

import pytest
import torch

import stitch

log = logging.getLogger("stitch.tests.moments")


class WrittenAfterPrint(torch.nn.Module):
    def forward(self, x):
        h = x * 2
        print("before", h, h[0])  # h[0] is a view: the write below reaches it too
        h.add_(1)
        return h


class NotWrittenAfter(torch.nn.Module):
    def forward(self, x):
        h = x * 2
        print("value", h)
        return h + 1


class FormatSpecs(torch.nn.Module):
    def forward(self, x):
        loss = x.mean()
        log.warning(f"loss {loss.item():.4f} over {x.shape[0]} rows, total {x.sum():.2f}")
        print("sum is {:.3f} / {!r}".format(x.sum(), x.shape[0]))  # noqa: UP032
        print("pct %s" % x.max(), f"{x.min()!r}", str(x[0, 0]))  # noqa: UP031
        return x - 1


def _clones(program) -> int:
    return sum(n.target == torch.ops.aten.clone.default
               for n in program.exported_program.graph.nodes)


def _said(fn, x, caplog):
    caplog.clear()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = fn(x)
    return result, out.getvalue(), [r.getMessage() for r in caplog.records
                                     if r.name == log.name]


@pytest.mark.parametrize("make, copies", [(WrittenAfterPrint, 2), (NotWrittenAfter, 0)],
                         ids=["written-after", "not-written"])
def test_a_print_sees_the_value_of_its_moment(make, copies, caplog):
    x = torch.arange(6.0).reshape(2, 3)
    program = stitch.export(make(), (x,), examples=[((x + 5,), {})])
    assert _clones(program) == copies  # a copy only where a later write needs it
    for inp in (x, -x):
        want = _said(make(), inp, caplog)
        got = _said(program, inp, caplog)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1]
    if copies:  # the printed value is h before the write: x * 2, not x * 2 + 1
        assert _said(program, x, caplog)[1].startswith("before tensor([[ 0.,  2.,  4.]")


def test_format_specs_and_conversions_give_eagers_text(caplog):
    caplog.set_level(logging.WARNING, logger=log.name)
    x = torch.arange(6.0).reshape(2, 3) / 7
    program = stitch.export(FormatSpecs(), (x,), examples=[((x * -3,), {})])
    templates = [a for e in program.epilogue.entries for a in e.args if a.kind == "template"]
    assert len(templates) == 5, program.epilogue.entries
    for inp in (x, x * 10 - 1, torch.randn(2, 3)):
        want = _said(FormatSpecs(), inp, caplog)
        got = _said(program, inp, caplog)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1] and got[2] == want[2], (got, want)
    assert "loss 0.3571 over 2 rows" in _said(program, x, caplog)[2][0]


class FormatsInBranch(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        h = self.lin(x)
        if h.mean() > 0:
            print(f"pos {h.min()!r} {h.sum():.3f} rows={h.shape[0]}")
            log.warning(f"max {h.max().item():.2f}")
            h = h * 2
        else:
            print(f"neg {h.mean()}")
        return h


def test_text_formatted_in_a_branch_is_formatted_in_the_epilogue(caplog):
    """f-strings over traced tensors inside a data-dependent branch: one cond, the text
    made by the epilogue only when the branch ran, eager's exactly (under no_grad, where a
    tensor's repr names no grad_fn)."""
    caplog.set_level(logging.WARNING, logger=log.name)
    torch.manual_seed(0)
    model = FormatsInBranch()
    x = torch.randn(2, 3)
    pos = x if model.lin(x).mean() > 0 else -x
    program = stitch.export(model, (pos,), examples=[((-pos,), {})])
    assert program.report.graph_ops.get("cond") == 1, str(program.report)
    with torch.no_grad():
        for inp in (pos, -pos, pos * 3):
            want = _said(model, inp, caplog)
            got = _said(program, inp, caplog)
            torch.testing.assert_close(got[0], want[0])
            assert got[1] == want[1] and got[2] == want[2], (got, want)


class PrintAfterCountedLoop(torch.nn.Module):
    def forward(self, x):
        print("in {:.2f} {!r}".format(x.max(), x.shape[0]))  # noqa: UP032
        k = (x.mean() > 0).long() + 1
        for _ in range(int(k.item())):  # a while_loop: its call spans the loop's lines
            x = torch.tanh(x * 1.5)
        print("out {:.2f} {!r}".format(x.max(), x.shape[0]))  # noqa: UP032
        return x


def test_a_print_after_a_rewritten_loop_is_found_at_its_own_line(caplog):
    """A synthesized statement spanning lines can make Dynamo number the next resume
    function's lines wrongly; the print after the loop, reported four lines down, would be
    refused as an unknown call."""
    x = torch.randn(4, 8)
    program = stitch.export(PrintAfterCountedLoop(), (x,), examples=[((-x - 1,), {})])
    assert program.report.graph_ops.get("while_loop") == 1, str(program.report)
    for inp in (x, -x - 1):
        got, want = _said(program, inp, caplog), _said(PrintAfterCountedLoop(), inp, caplog)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1]


class FormatsAfterABufferBranch(torch.nn.Module):
    """Dynamo 2.14 fails inside itself on this forward's f-string (``:.3f`` of a scalar read)
    when it recompiles the resume function for the second example ("Unknown format code 'f'
    for object of type 'str'", an InternalTorchDynamoError)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.l0 = torch.nn.Linear(8, 8)
        self.l1 = torch.nn.Linear(8, 8)
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x):
        h = torch.tanh(self.l1(torch.tanh(self.l0(x)) + x * 0.1))
        if h.mean() > 0.1:
            self.count += 1
        elif float(h.mean()) > -0.3:
            h = h * 0.5 + 0.25
        else:
            h = -h
        h = h + self.count
        log.warning(f"f {h.mean().item():.3f}")
        return h


def test_dynamo_failing_inside_itself_is_a_refusal_never_a_crash():
    """Exported and verified, or refused with a StitchError naming torch.compile: never
    Dynamo's internal error out of stitch.export."""
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(1))
    try:
        program = stitch.export(FormatsAfterABufferBranch(), (x,), examples=[((x * 4 + 2,), {})])
    except stitch.StitchError as refused:
        assert "torch.compile failed" in str(refused)
    else:
        torch.testing.assert_close(program(x), FormatsAfterABufferBranch()(x))
