"""A scalar read a function returns is a read in its caller (``returned_reads.py``).

A read made in a helper and returned (``k = self.read(x)``) must reach the caller as a read,
not as the 0-d tensor it is in the program: there ``10 // k`` at 0 would raise torch's
``RuntimeError`` where the model raises ``ZeroDivisionError``, and ``print(n / 3)`` would
print ``tensor(0.6667)``."""

from __future__ import annotations

import number_helper_utils
import pytest
import torch

import stitch
from stitch.plan import Action


def count_positive(t):
    return int((t > 0).sum())


class PrintedCount(torch.nn.Module):
    """A module function makes the read; the caller, which breaks only for its print,
    divides and prints it."""

    def forward(self, x):
        n = count_positive(x)
        print("n/3 =", n / 3)
        return x + n // 2


class TenOver(torch.nn.Module):
    def read(self, t):
        return int((t > 0).sum())

    def forward(self, x):
        k = self.read(x)
        return x * (10 // k)


class TwoFramesUp(torch.nn.Module):
    """The read comes back through a method that returns it on (``width`` is on the call
    chain and is no break site: it is rewritten for its operators and returns a read)."""

    def read(self, t):
        return int((t > 0).sum())

    def width(self, t):
        k = self.read(t)
        return k * 2 + 1

    def forward(self, x):
        w = self.width(x)
        print("ratio", w / 7)
        return x * (100 // w)


def _rows(*rows):
    return [torch.tensor(r, dtype=torch.float32) for r in rows]


def _same_text(capfd, program, model, x):
    capfd.readouterr()
    want = model(x)
    expected = capfd.readouterr().out
    got = program(x)
    assert capfd.readouterr().out == expected
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    return expected


def test_a_returned_read_prints_and_divides_as_python(capfd):
    model = PrintedCount()
    first, second = _rows([1., -2., 4.], [3., 2., 1.])
    program = stitch.export(model, (first,), examples=[((second,), {})])
    assert _same_text(capfd, program, model, first) == "n/3 = 0.6666666666666666\n"
    assert _same_text(capfd, program, model, _rows([-1., -1., -1.])[0]) == "n/3 = 0.0\n"
    rows = [d for d in program.report.decisions
            if d.action == Action.TENSOR_SCALAR and "count_positive" in d.reason]
    assert rows and rows[0].function.endswith("PrintedCount.forward"), str(program.report)


def test_a_read_returned_through_two_frames(capfd):
    model = TwoFramesUp()
    first, second = _rows([1., -2., 4.], [3., 2., 1.])
    program = stitch.export(model, (first,), examples=[((second,), {})])
    assert _same_text(capfd, program, model, first) == "ratio 0.7142857142857143\n"
    assert _same_text(capfd, program, model, second) == f"ratio {7 / 7}\n"
    helped = {d.function.rsplit(".", 1)[-1] for d in program.report.decisions
              if d.action == Action.TENSOR_SCALAR and "returns a scalar read" in d.reason}
    assert {"width", "forward"} <= helped, str(program.report)


class CallerWithItsOwnBranch(torch.nn.Module):
    """The caller is rewritten for a break of its own (a branch on a tensor): it is
    rewritten again once ``read`` is known to return a read."""

    def read(self, t):
        return int((t > 0).sum())

    def forward(self, x):
        k = self.read(x)
        if x.mean() > 0:
            x = x * 2
        return x + (10 // k), k / 3


def test_a_caller_rewritten_for_its_own_branch_counts_the_returned_read():
    model = CallerWithItsOwnBranch()
    first, second = _rows([1., -2., 4.], [-3., -2., 1.])
    program = stitch.export(model, (first,), examples=[((second,), {})])
    assert program.report.graph_ops.get("cond", 0) + program.report.graph_ops.get(
        "where", 0) >= 1, str(program.report)
    for x in (first, second, _rows([5., 6., 7.])[0]):
        got, want = program(x), model(x)
        torch.testing.assert_close(got[0], want[0], rtol=0, atol=0)
        assert type(got[1]) is float and got[1] == want[1], (got[1], want[1])
    zero = _rows([-1., -2., -4.])[0]
    with pytest.raises(ZeroDivisionError):
        program(zero)


class Counter(torch.nn.Module):
    def forward(self, t):
        return int((t > 0).sum())


class SubmoduleReturns(torch.nn.Module):
    """A submodule's forward makes the read: its call (``self.counter(x)``) is not found by
    name, but the break's call chain went into it from that line."""

    def __init__(self):
        super().__init__()
        self.counter = Counter()

    def forward(self, x):
        k = self.counter(x)
        print("k/3", k / 3)
        return x * (7 // k)


def test_a_read_a_submodule_returns_is_a_read_in_the_caller(capfd):
    model = SubmoduleReturns()
    first, second = _rows([1., -2., 4.], [3., 2., 1.])
    program = stitch.export(model, (first,), examples=[((second,), {})])
    assert _same_text(capfd, program, model, first) == "k/3 0.6666666666666666\n"
    assert _same_text(capfd, program, model, second) == "k/3 1.0\n"
    with pytest.raises(ZeroDivisionError):
        program(_rows([-1., -2., -4.])[0])


class LoopAndSubmodule(torch.nn.Module):
    """The caller is rewritten for breaks of its own (an ``if <data>: break`` in a loop:
    runtime calls with no line) and calls a submodule returning a read: ``calls_to`` must
    not read the line of a call that has none."""

    def __init__(self):
        super().__init__()
        self.counter = Counter()

    def forward(self, x):
        k = self.counter(x)
        for _ in range(3):
            if x.sum() > 10:
                break
            x = x + 1
        return x * (10 // k)


class Base(torch.nn.Module):
    def read(self, t):
        return t.sum()

    def forward(self, x):
        k = self.read(x)
        return x * (10 // k)


class Child(Base):
    """``self.read`` in ``Base.forward`` runs the override, which makes a read."""

    def read(self, t):
        return int((t > 0).sum())


class ByClassName(torch.nn.Module):
    @staticmethod
    def read(t):
        return int((t > 0).sum())

    def forward(self, x):
        k = ByClassName.read(x)
        return x * (10 // k)


class UserModuleReturns(torch.nn.Module):
    def forward(self, x):
        k = number_helper_utils.count_above(x, 0)
        return x * (10 // k)


@pytest.mark.parametrize("model", [TenOver(), LoopAndSubmodule(), Child(), ByClassName(),
                                   UserModuleReturns()],
                         ids=["method", "loop-and-submodule", "subclass-override",
                              "class-name", "user-module"])
def test_floor_division_by_a_returned_read_raises_zero_division(model):
    first, second = _rows([1., -2., 4.], [3., 2., 5.])
    program = stitch.export(model, (first,), examples=[((second,), {})])
    for x in (first, second, _rows([5., 1.5, 9.])[0]):
        torch.testing.assert_close(program(x), model(x), rtol=0, atol=0)
    zero = _rows([-0.5, -0.5, -0.5])[0]
    with pytest.raises(ZeroDivisionError):
        model(zero)
    with pytest.raises(ZeroDivisionError):
        program(zero)


class ReadOrTensor(torch.nn.Module):
    """A read on one side of a data-dependent branch, a tensor on the other: what follows
    keeps Python's rules on one side only, and the program has one kind."""

    def read(self, t):
        s = t.sum()
        if s > 0:
            return int(s)
        return s.long()

    def forward(self, x):
        k = self.read(x)
        return x * 2, k / 3


def test_a_read_on_one_side_and_a_tensor_on_the_other_is_refused():
    first, second = _rows([1., -2., 4.], [-3., -2., 1.])
    with pytest.raises(stitch.errors.VerificationError, match="differ by kind"):
        stitch.export(ReadOrTensor(), (first,), examples=[((second,), {})])
