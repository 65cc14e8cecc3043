"""Python numbers a data-dependent branch changes (a count, a scale) are carried through
torch.cond: ints and bools as torch.cond returns them, floats as 0-d tensors read back
after the cond (synthesize/operators/rt_numbers.py)."""

from __future__ import annotations

import pytest
import torch

import stitch


class CountsAndScales(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.lin(x)
        n, scale, tag = 0, 1.0, "a"
        if h.sum() > 0:
            n += 2
            scale = scale * 0.5
            h = h * 2
        else:
            n -= 1
        return h * n + scale, n, scale, tag


class ChangesKind(CountsAndScales):
    def forward(self, x):
        h = self.lin(x)
        n = 3
        if h.sum() > 0:
            n = n / 2  # an int becomes a float on one side only
            h = h * 2
        return h * n


class ReturnsNumbersAndPrints(CountsAndScales):
    """The numbers leave through a return in the branch (the rest of the function becomes
    the other arm) and the branch prints (the cond with deferred effects)."""

    def forward(self, x):
        h = self.lin(x)
        n, scale = 0, 1.0
        if h.sum() > 0:
            n += 1
            print("positive", h.mean())
            return h * 2.0, n, scale
        scale = scale * 0.5
        return h, n, scale


class NestedCounts(CountsAndScales):
    """An elif chain: the inner cond's numbers leave through the outer cond (under
    torch.compile a branch may return only constant ints, so they travel as tensors)."""

    def forward(self, x):
        h = self.lin(x)
        n, scale = 0, 1.0
        if h.sum() > 0.0:
            h = h * 2
        elif h.sum() > -0.3:
            h = h + 1
        else:
            n += 1
            scale = scale * 0.5
        return h * (1.0 + 0.1 * n) * scale, n, scale


class PrintsBetweenReturns(CountsAndScales):
    """The print makes the first branch's continuation a branch with deferred effects; the
    second branch, inside it, returns numbers: probing the first one's arms on fake
    tensors must not trace the second (else: "pending unbacked symbols"),
    and the first one's arms must return ``n`` as the same kind (a constant int on one
    side, the second cond's symbolic int on the other)."""

    def forward(self, x):
        h = self.lin(x)
        n, scale = 0, 1.0
        if h.mean() > 5.0:
            return h * 2.0, n, scale
        print("mid", h.mean())
        if h.mean() > 0.0:
            scale = scale * 0.5
            return h * 2.0, n, scale
        return h, n + 1, scale


class CountsAfterAReturn(CountsAndScales):
    """The returning branch's other side holds the ``elif`` that counts: there ``n`` is the
    inner cond's (symbolic) int, on the returning side a constant (mishandled, torch.cond
    refuses: "unsupported branch return type")."""

    def forward(self, x):
        h = self.lin(x)
        n, scale = 0, 1.0
        if h.mean() > 0.0:
            return h * 2.0, n, scale
        elif h.mean() > -0.05:
            h = h + 1.0
        else:
            n += 1
        return h * (1.0 + 0.1 * n) * scale, n, scale


class NumbersThroughNestedEffects(CountsAndScales):
    """Two flag continuations and a print after them: the second is a branch with deferred
    effects nested in the first one's arms, and returns the numbers (mishandled, torch.cond
    refuses: "HOP body output ... got <class 'float'>")."""

    def forward(self, x):
        h = self.lin(x)
        n, scale = 0, 1.0
        f1 = h.mean() > 0
        if f1:
            v1 = h * 2.0
        if f1:
            h = h + v1
        f2 = h.sum() > 1.0
        if f2:
            v2 = h * 3.0
        if f2:
            h = h + v2
        print("h", h.max())
        return h * (1.0 + 0.1 * n) * scale, n, scale


class CountsTwice(CountsAndScales):
    """Two branches in a row change the same numbers: the second one's operands are the
    first one's symbolic outputs (torch.cond takes no SymFloat: they go in as tensors)."""

    def forward(self, x):
        h = self.lin(x)
        n, scale = 0, 1.0
        if h.mean() > 0:
            n += 1
            scale = scale * 0.5
        if h.sum() > 1.0:
            n += 2
            scale = scale + 0.25
        return h * (1.0 + 0.1 * n) * scale, n, scale


class NumbersAfterAnUntakenReturn(CountsAndScales):
    """The numbers leave through a cond in the continuation of a branch with effects that
    no example took: its arms never ran eagerly, so which outputs are numbers is noted when
    the enclosing branch's arms are probed (a float is no torch.cond output)."""

    def forward(self, x):
        h = self.lin(x)
        n, scale = 0, 1.0
        if h.sum() > 0:
            print("positive", h.mean())
            return h * 2.0, n, scale
        print("not positive", h.mean())
        f = h.mean() > -0.3
        if f:
            v = torch.tanh(h)
        if f:
            h = h + v * 0.5
        if not f:
            h = h - 0.25
        return h * (1.0 + 0.1 * n) * scale, n, scale


class NumbersThroughCopiedBranches(CountsAndScales):
    """Two flags whose `if`s continue the function: the second flag's branch is copied into
    both arms of the first, and the copy in the arm no example took never ran eagerly; it
    returns the numbers as the other copy does (keyed by the branch's site)."""

    def forward(self, x):
        h = self.lin(x)
        n, scale = 0, 1.0
        f = h.sum() > 0
        if f:
            v = -h
        if f:
            h = h + v * 0.25
        g = h.mean() > 0.0
        if g:
            w = h * 0.5
        if g:
            h = h + w
        return h * (1.0 + 0.1 * n) * scale, n, scale


class ReadInALaterBranch(CountsAndScales):
    """Numbers an earlier cond carried (an unbacked int, a float read back) that a later
    branch only reads: passed in as operands, each a 0-d tensor inside the arm (through the
    arm's closure torch.cond cannot lift them: "Attempted to wrap unbacked SymInt")."""

    def forward(self, x):
        h = self.lin(x)
        n, scale = 0, 1.0
        if h.sum() > 0:
            n += 1
            scale = scale * 0.5
        if h.mean() > 0.05:
            h = h * (1.0 + 0.1 * n) * scale
        return h, n, scale


class ReadWithAnEffect(CountsAndScales):
    def forward(self, x):
        h = self.lin(x)
        n, scale = 0, 1.0
        if h.sum() > 0:
            scale = scale * 0.5
        if h.mean() > 0.05:
            print("scaled", h.sum())
            h = h * scale
        return h, n, scale


class ReadInANestedBranch(CountsAndScales):
    def forward(self, x):
        h = self.lin(x)
        n, scale = 0, 1.0
        if h.sum() > 0:
            scale = scale * 0.5
        if h.mean() > 0.05:
            if h.max() > 1.0:
                h = h * scale
            else:
                h = h + 1
        return h, n, scale


class ReturnsWhatItRead(CountsAndScales):
    """A later branch returns the numbers it only read (the rest of the function is its
    continuation): one arm hands back the symbolic ones, so every number travels as a
    tensor."""

    def forward(self, x):
        h = self.lin(x)
        n, scale = 0, 1.0
        if h.sum() > 0:
            n += 1
            scale = scale * 0.5
        if h.mean() > 0.05:
            return h * scale, n, scale
        return h * (1.0 + 0.1 * n) * scale, n, scale


def _scaled(h, scale, n):
    return h * (1.0 + 0.1 * n) * scale


class ReadThroughAHelper(CountsAndScales):
    """The later branch hands the numbers to a helper instead of using them itself."""

    def forward(self, x):
        h = self.lin(x)
        n, scale = 0, 1.0
        if h.sum() > 0:
            n += 1
            scale = scale * 0.5
        if h.mean() > 0.05:
            h = _scaled(h, scale, n)
        return h, n, scale


def _both(model):
    x = torch.randn(4, 8)
    pos = x if model.lin(x).sum() > 0 else -x
    return pos, -pos


@pytest.mark.parametrize("make", [CountsAndScales, NestedCounts, PrintsBetweenReturns,
                                  CountsAfterAReturn, NumbersThroughNestedEffects, CountsTwice,
                                  NumbersAfterAnUntakenReturn, NumbersThroughCopiedBranches,
                                  ReadInALaterBranch, ReadWithAnEffect, ReadInANestedBranch,
                                  ReturnsWhatItRead, ReadThroughAHelper])
def test_numbers_changed_in_a_branch_are_carried_both_ways(make):
    torch.manual_seed(0)
    model = make()
    pos, neg = _both(model)
    program = stitch.export(model, (pos,))  # one example: the other side is forced
    assert program.report.graph_ops.get("cond", 0) >= 1
    assert any("forced" in c.what for c in program.report.checks)
    for x in (pos, neg, pos * 3, neg * 0.01):
        got, want = program(x), model(x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1:] == want[1:]
        assert [type(v) for v in got[1:]] == [type(v) for v in want[1:]]  # int, float, str


def test_numbers_returned_from_a_branch_with_effects(capsys):
    torch.manual_seed(0)
    model = ReturnsNumbersAndPrints()
    pos, neg = _both(model)
    program = stitch.export(model, (neg,))
    capsys.readouterr()
    for x in (pos, neg):
        with torch.no_grad():  # with grad, a printed tensor shows the graph's grad_fn
            got = program(x)
            printed = capsys.readouterr().out
            want = model(x)
        assert capsys.readouterr().out == printed
        torch.testing.assert_close(got[0], want[0])
        assert got[1:] == want[1:] and type(got[2]) is float


def test_a_number_that_changes_kind_on_one_side_takes_the_rest_of_the_function():
    # one cond over `n` fails (an int on one side, a float on the other); with the rest of
    # the function in each arm both sides return a tensor
    torch.manual_seed(0)
    model = ChangesKind()
    pos, neg = _both(model)
    program = stitch.export(model, (pos,))
    cond = next(d for d in program.report.decisions if d.action.value == "torch.cond")
    assert "the rest of the function became each branch's continuation" in cond.reason
    for x in (pos, neg, pos * 3):
        torch.testing.assert_close(program(x), model(x))


# an early return with effects hands back the float `scale` it only read; the float reaches
# the arms through their closure as a constant and must leave them as a tensor: no cond
# returns a Python float
FLOAT_READ_BY_AN_ARM = """\
        h = torch.tanh(self.l0(x)) + x * 0.1
        n, scale = 0, 1.0
        for e1 in (h.mean(0) > -0.3).nonzero():
            h[:, e1[0]] = h[:, e1[0]] * 0.5 + self.l1.bias[e1[0]]
        if h.sum().item() > -0.1:
            print('p3', h.mean())
            if h.sum().item() > -0.3:
                logger.warning('l5 %.4f', h.sum())
            return h * 2.0, n, scale
        else:
            k6 = (h.mean() > 0).long() + 1
            for _ in range(int(k6.item())):
                h = torch.tanh(h * 1.5)
            n += 1
        if float(h.mean()) > -0.3:
            k9 = (h.mean() > 0).long() + 1
            for _ in range(int(k9.item())):
                h = torch.tanh(h * 1.5)
            n += 1
        else:
            print('p11', h.mean())
        f12 = h.mean() > 0.0
        if f12:
            v12 = -h
        if f12:
            h = h + v12 * 0.5
        if not f12:
            h = h - 0.25
        h = h * (1.5 if f12 else 0.5)
        return h * (1.0 + 0.1 * n) * scale, n, scale
"""


def test_a_float_an_arm_only_read_leaves_the_cond_as_a_float(tmp_path, capsys):
    from tests.zoo import fuzz

    module = fuzz.load_program(fuzz.HEADER + FLOAT_READ_BY_AN_ARM, str(tmp_path))
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(1))
    program = stitch.export(module.Fuzz(), (x,), examples=[((x * 4 + 2,), {})])
    for i in (x, x * 4 + 2, -x * 4 - 2, x * 0.1):
        with torch.no_grad():
            got = program(i)
            want = module.Fuzz()(i)
        torch.testing.assert_close(got[0], want[0])
        assert got[1:] == want[1:] and type(got[2]) is float


class ReturnsItsReads(torch.nn.Module):
    """Each branch returns a number read from the data (a bool, an int, a float)."""

    def forward(self, x):
        ok, n, m = bool((x > 0).all()), int((x > 0).sum()), x.mean().item()
        if ok:
            return x, ok, n, m * 2.5
        return -x, ok, n, -m / 3


def test_numbers_read_from_data_returned_by_a_branch():
    """The forced side's reference (the rewritten code run eagerly) holds those numbers as
    0-d tensors, the program as numbers: verification compares their values (it raised
    a bare TypeError)."""
    model = ReturnsItsReads()
    x = torch.arange(1.0, 4.0)
    program = stitch.export(model, (x,))
    for inputs in (x, -x, torch.tensor([1.0, -2.0, 3.0])):
        got, want = program(inputs), model(inputs)
        torch.testing.assert_close(got[0], want[0])
        assert [type(v) for v in got[1:]] == [bool, int, float], got
        assert got[1:3] == want[1:3] and got[3] == pytest.approx(want[3]), (got, want)
