"""Checks and loop counts on an input's size that torch.export decided for the examples'
sizes. An ``assert`` or an ``if ...: raise`` becomes a runtime check on the size: on the
sizes the examples did not have, the program raises the model's own exception, where a
guard on the inputs would raise torch's ``Guard failed``. A loop counted by a size test
(``range(1 + int(any(...)))``) is unrolled to the count's bound over the sizes' ranges,
each iteration a cond on the size, its calls replayed per iteration."""

from __future__ import annotations

import re

import pytest
import torch
from torch import _assert as check_size

import stitch


class AssertsOnSizes(torch.nn.Module):
    def forward(self, x):
        h = x * 1.5
        # the examples have more than 3 rows: torch.export decides the first operand
        assert h.shape[0] > 3 or h.shape[1] % 8 != 0, "input rejected"
        return h * 2.0


class TorchAssertsOnSizes(torch.nn.Module):
    def forward(self, x):
        h = x * 1.5
        torch._assert(h.shape[0] > 3 or h.shape[1] % 8 != 0, "input rejected")
        return h * 2.0


class ChecksSizesByAnotherName(torch.nn.Module):
    def forward(self, x):
        h = x * 1.5
        check_size(h.shape[0] > 3 or h.shape[1] % 8 != 0, "input rejected")  # torch._assert
        return h * 2.0


class PrintsThenRaises(torch.nn.Module):
    def forward(self, x):
        h = x * 1.5
        if h.shape[1] % 8:  # the examples have multiples of 8
            print(f"mean={h.mean().item():.2f}")
            raise ValueError(f"input rejected: {h.shape[0]} rows")
        return h * 2.0


def _same(model, program, x, capsys, prefix: str | None = None):
    """``program(x)`` as ``model(x)``: its output, or its exception (type and message, or
    the message's ``prefix``), and what it printed."""
    try:
        want = model(x)
    except Exception as e:  # noqa: BLE001 - the model's own exception, compared below
        want_text = capsys.readouterr().out
        # (the first line: pytest rewrites this file's asserts, adding its explanation)
        with pytest.raises(type(e), match=re.escape(prefix or str(e).splitlines()[0])):
            program(x)
        # on an input that raises, the calls before the ``raise`` are not replayed (the
        # check stops the graph first: a limit, docs/rewrites.md)
        assert capsys.readouterr().out in (want_text, "")
        return
    want_text = capsys.readouterr().out
    torch.testing.assert_close(program(x), want)
    assert capsys.readouterr().out == want_text


@pytest.mark.parametrize("model_type",
                         [AssertsOnSizes, TorchAssertsOnSizes, ChecksSizesByAnotherName])
def test_an_assert_on_sizes_is_a_check_not_a_guard(capsys, model_type):
    model = model_type()
    program = stitch.export(model, (torch.rand(4, 8),), examples=[((torch.rand(5, 16),), {})])
    assert not program.exported_program._guards_code  # no guard on the inputs' sizes
    for shape in [(2, 8), (2, 6), (3, 5), (6, 8), (6, 3)]:
        _same(model, program, torch.rand(*shape), capsys)


def test_a_raise_on_sizes_prints_and_raises_as_the_model_does(capsys):
    model = PrintsThenRaises()
    program = stitch.export(model, (torch.rand(4, 8),), examples=[((torch.rand(5, 16),), {})])
    capsys.readouterr()
    assert not program.exported_program._guards_code
    for shape in [(3, 8), (4, 12), (3, 6), (2, 24)]:
        # a message formatting a value known only at run time is its source text (a limit
        # of checks, docs/rewrites.md), so only its start is compared
        _same(model, program, torch.rand(*shape), capsys, prefix="f'input rejected: ")


class CountedBySizes(torch.nn.Module):
    def forward(self, x):
        h = x * 1.5
        # 1 on the examples (every size a multiple of 4), 2 on other sizes
        for _ in range(1 + int(any(s % 4 != 0 for s in h.shape))):
            print(f"sum={h.sum().item():.3f}")  # a call per iteration, replayed
            h = h * 2.0 - 0.5
        return h


def test_a_loop_counted_by_a_size_test_runs_its_count_on_every_size(capsys):
    model = CountedBySizes()
    program = stitch.export(model, (torch.rand(4, 8),), examples=[((torch.rand(8, 12),), {})])
    capsys.readouterr()
    assert not program.exported_program._guards_code  # the count follows the sizes
    for shape in [(4, 8), (6, 8), (3, 5), (12, 4)]:
        _same(model, program, torch.rand(*shape), capsys)
