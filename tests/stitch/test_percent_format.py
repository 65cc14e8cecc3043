"""printf-style text (``"loss %.4f" % loss.item()``) in a print, log or warning call, in a
branch or not: the epilogue formats the graph's values with the text ``%`` gives
(``canonicalize/percent_format.py``). torch.export could not decide ``float()`` of the
symbolic read ``%`` asks for, and refused the model."""

from __future__ import annotations

import logging

import pytest
import torch

import stitch
from stitch.epilogue.formatting import Text, percent_pieces

log = logging.getLogger("tests.percent")


class PercentText(torch.nn.Module):
    def forward(self, x):
        loss = (x ** 2).mean()
        if loss > 1.0:
            log.warning("high loss %.4f (%+d%%)" % (loss.item(), int(loss.item() * 10)))  # noqa: UP031
        print("loss %8.3f over %d rows, max %s" % (loss.item(), x.shape[0], x.max().item()))  # noqa: UP031
        print("mean %.2e" % x.mean().item())  # noqa: UP031
        return loss


def test_printf_style_text_is_formatted_by_the_epilogue(capsys, caplog):
    model = PercentText()
    program = stitch.export(model, (torch.full((3,), 0.5),),
                            examples=[((torch.full((4,), 2.0),), {})])
    for x in (torch.full((5,), 3.0), torch.tensor([0.25, -0.5]), torch.full((6,), 1.5)):
        capsys.readouterr()
        with caplog.at_level(logging.WARNING, logger="tests.percent"):
            caplog.clear()
            want = model(x)
            eager = capsys.readouterr().out, [r.getMessage() for r in caplog.records]
            caplog.clear()
            torch.testing.assert_close(program(x), want)
            assert (capsys.readouterr().out, [r.getMessage() for r in caplog.records]) == eager
    assert eager[0].startswith("loss    2.250 over 6 rows, max 1.5\nmean 1.50e+00")


@pytest.mark.parametrize("fmt", ["%d|%5d|%-5d|%05d", "%+.2e %g %G %.3F", "%s, %r and %10s|%-4s|",
                                 "%x %X %o %#x 100%%", "%i %u % d"])
def test_printf_specs_become_the_same_format_specs(fmt):
    pieces = percent_pieces(fmt)
    assert pieces is not None
    for args in ((3, 42, -7, 255), (2.75, 1e-3, 12345.678, 0.5), ("ab", "c", "def", "g")):
        n = sum(isinstance(p, tuple) for p in pieces)
        try:
            want = fmt % args[:n]
        except TypeError:
            continue
        assert str(Text(tuple(pieces), args[:n])) == want


def test_printf_forms_it_does_not_cover_are_none():
    for fmt in ("%(name)s", "%*d", "%c", "%.2d", "50%"):
        assert percent_pieces(fmt) is None
