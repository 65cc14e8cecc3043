"""Breaks the census cannot see, found by tracing. Code that only a branch no example takes:
torch.cond traces it anyway, so breaks there (a submodule only that branch calls, an ``if``
on a tensor inside it, scalar reads and tensor-counted loops after an early return) are
found by the failed trace, rewritten, and the cond tried again; buffers written there are
carried out; everything forced both ways. And a tensor assert Dynamo traces without a break
but torch.export refuses: found by the failed export, made a runtime check."""

from __future__ import annotations

import contextlib
import io

import pytest
import torch
from torch import nn

import stitch
from stitch.plan import Action


class Gate(nn.Module):
    """Breaks on its own, but only the branch no example takes calls it."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, h):
        g = self.lin(h)
        if g.mean() > 0:
            g = torch.relu(g)
        return g


class RarelyGated(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l0 = nn.Linear(8, 8)
        self.gate = Gate()
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x):
        h = self.l0(x)
        if x.mean() > 100:  # the examples never take it
            if float(h.mean()) > 0.0:  # never run by an example either
                self.count += 1
            h = self.gate(h)
            return h * 2.0
        s = h.abs().mean().item()  # after an early return: part of each branch
        h = h / (s + 1.0)
        for _ in range(int((h.mean() > 0).long().item()) + 1):
            h = torch.tanh(h * 1.5)
        return h


@pytest.fixture(scope="module")
def exported():
    torch.manual_seed(0)
    model = RarelyGated()
    x = torch.randn(4, 8)
    return model, stitch.export(model, (x,), examples=[((x * 3,), {})])


def test_breaks_in_the_untaken_branch_are_found_and_rewritten(exported):
    _model, program = exported
    report = program.report
    assert not [d for d in report.decisions if d.action.value == "guarded"], str(report)
    traced = [d for d in report.decisions if d.site.startswith("T")]
    assert [d.function for d in traced] == ["Gate.forward"], str(report)
    assert traced[0].action.value == "torch.cond"
    assert report.graph_ops.get("cond") == 3 and report.graph_ops.get("while_loop") == 1
    forced = [c.what for c in report.checks if "forced" in c.what]
    assert len([w for w in forced if "(within" in w]) == 4, forced  # both inner sites, both ways


def test_every_path_matches_eager_buffers_included(exported):
    model, program = exported
    torch.manual_seed(2)
    for x in (torch.randn(4, 8), torch.randn(4, 8) + 200, torch.randn(4, 8) * 5 + 200):
        with torch.no_grad():
            torch.testing.assert_close(program(x), model(x))
        torch.testing.assert_close(dict(program._module.named_buffers())["model.count"],
                                   model.count)


class ChecksWhenShifted(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        if x.mean() > 100:
            assert x.abs().max() < 1e3, "shifted input out of range"
        else:
            assert x.abs().max() < 1e6, "input out of range"
        return self.lin(x)


def test_a_branch_holding_only_asserts_folds_into_checks():
    torch.manual_seed(0)
    model = ChecksWhenShifted()
    program = stitch.export(model, (torch.randn(2, 8),))
    folded = [d for d in program.report.decisions if "folded into the checks" in d.reason]
    assert len(folded) == 1 and program.report.graph_ops.get("cond", 0) == 0
    assert program.report.graph_ops.get("assert") == 2
    ok_shifted = torch.full((2, 8), 200.0)
    too_big_shifted = ok_shifted.clone()
    too_big_shifted[0, 0] = 5e3  # mean still > 100
    big_unshifted = torch.zeros(2, 8)
    big_unshifted[0, 0], big_unshifted[0, 1] = 5e3, -5e3  # mean 0: the shifted check
    # must not fire here
    for x in (ok_shifted, big_unshifted):
        with torch.no_grad():
            torch.testing.assert_close(program(x), model(x))
    for x, message in ((too_big_shifted, "shifted input out of range"),
                       (torch.full((2, 8), 1e7) * torch.tensor([1.0, -1.0]).repeat(4),
                        "input out of range")):
        with pytest.raises(AssertionError, match=message):
            model(x)
        with pytest.raises(AssertionError, match=message):
            program(x)


class ChecksWhenShiftedAndWide(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        if x.mean() > 100:
            if x.max() - x.min() > 10:
                assert x.abs().max() < 1e3, "wide shifted input out of range"
        return self.lin(x)


@pytest.mark.parametrize("seen", [True, False])
def test_nested_branches_holding_only_asserts_fold_into_one_check(seen):
    """The inner branch folds first; the outer then holds only that check (and the inner
    predicate): it folds too, so no side is guarded away. Unseen (no example reaches the
    inner `if`, so it is a Python-level `if` to the rewrite), its test folds in lazily."""
    torch.manual_seed(0)
    model = ChecksWhenShiftedAndWide()
    shifted = torch.full((2, 8), 200.0)
    program = stitch.export(model, (torch.randn(2, 8),),
                            examples=[((shifted,), {})] if seen else [])
    assert {d.action for d in program.report.decisions} == {Action.CHECK}
    assert program.report.graph_ops.get("cond", 0) == 0
    wide = shifted.clone()
    wide[0, 0] = 250.0  # shifted and wide, in range
    too_big = shifted.clone()
    too_big[0, 0] = 5e3  # shifted, wide, out of range
    big_narrow = torch.full((2, 8), 2e3)  # shifted, narrow: the check must not fire
    big_unshifted = torch.zeros(2, 8)
    big_unshifted[0, 0], big_unshifted[0, 1] = 5e3, -5e3  # wide but mean 0: must not fire
    for x in (torch.randn(2, 8), shifted, wide, big_narrow, big_unshifted):
        with torch.no_grad():
            torch.testing.assert_close(program(x), model(x))
    for fn in (model, program):
        with pytest.raises(AssertionError, match="wide shifted input out of range"):
            fn(too_big)


def test_an_assert_torch_export_refuses_becomes_a_check():
    """The model lives in hostile_models.py: pytest rewrites asserts in test files."""
    from hostile_models import AssertsInGraph

    torch.manual_seed(0)
    model = AssertsInGraph()
    x = torch.randn(2, 4)
    with pytest.raises(Exception, match="data-dependent"):
        torch.export.export(model, (x,))
    program = stitch.export(model, (x,))
    report = program.report
    assert report.breaks_before == 0 and report.graph_ops.get("assert") == 1
    [found] = [d for d in report.decisions if d.site == "E1"]
    assert found.action.value == "runtime check" and found.location.endswith(
        f":{AssertsInGraph.forward.__code__.co_firstlineno + 2}")
    with torch.no_grad():
        torch.testing.assert_close(program(x), model(x))
    with pytest.raises(AssertionError, match="activations blew up"):
        program(torch.full((2, 4), 1e7))


class LoopsThenBranchLoops(nn.Module):
    """A tensor-counted loop whose output reaches a cond holding another such loop (torch
    2.14 failed to trace it until the loop's outputs were copies)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        h = self.lin(x)
        for _ in range(int(((h.mean() > 0).long() + 1).item())):
            h = torch.tanh(h * 1.5)
        if h.sum() > -100:
            for _ in range(int(((h.mean() > 0).long() + 1).item())):
                h = torch.tanh(h * 1.5)
            h = h * 2.0
        return h


def test_loop_output_into_a_branch_holding_a_loop():
    torch.manual_seed(0)
    model = LoopsThenBranchLoops()
    x = torch.randn(4, 8)
    program = stitch.export(model, (x,))
    assert program.report.graph_ops.get("while_loop") == 2
    assert program.report.graph_ops.get("cond") == 1
    for inp in (x, -x, x - 500):
        with torch.no_grad():
            torch.testing.assert_close(program(inp), model(inp))


class PrintsThenNestedIf(nn.Module):
    """A branch with a print (its arms run in Python under torch.export, to collect what
    they print) holds an ``if`` no example reached: torch.export's guard on it names no
    frame in its text, only in its traceback, and the census that captures the loop's
    nonzero() must keep the site it found."""

    def forward(self, x):
        h = torch.tanh(x)
        if h.mean() > 0.3:
            if not h.mean() > 0.5:
                h = h * 3
            print("big", h.sum())
            return h * 2.0
        for e in (h.mean(0) > -0.5).nonzero():
            h[:, e[0]] = h[:, e[0]] * 0.5
        return h - 1


def test_an_if_in_a_branch_with_effects_no_example_took_is_found_by_export():
    x = torch.linspace(-1, 1, 8).reshape(2, 4)
    program = stitch.export(PrintsThenNestedIf(), (x,), examples=[((x - 1,), {})])
    found = [d for d in program.report.decisions  # E1, or R2.E1 when found after round 1
             if d.site.rpartition(".")[2].startswith("E")]
    assert found and found[0].action.value == "torch.cond", str(program.report)
    for inp in (x, x + 0.8, x + 5):
        torch.testing.assert_close(program(inp), PrintsThenNestedIf()(inp))


class HalvesSelectedColumnsWhenRare(nn.Module):
    """A loop over ``nonzero()`` in an arm no example takes: torch.cond's trace of that arm
    stops with "Could not extract specialized integer from data-dependent expression" (the
    loop's length); the site it names is rewritten like one the census found."""

    def forward(self, x):
        h = torch.tanh(x)
        if h.mean() > 0.9 or h.min() > 0.5:
            h = h + 1
        elif h.abs().mean() > 0.0:
            h = h * 2
        else:
            for e in (h.mean(0) > 0.3).nonzero():
                h[:, e[0]] = h[:, e[0]] * 0.5
        return h - 1


class PrintsOrHalvesWhenRare(nn.Module):
    """As above under a branch with a print: its arms run in Python in the census, so the
    loop's arm is first traced by torch.export, which says "Could not extract specialized
    integer" instead."""

    def forward(self, x):
        h = torch.tanh(x)
        if h.mean() > 0.9:
            print("high", h.mean())
        elif h.abs().mean() > 0.0:
            h = h * 2
        else:
            for e in (h.mean(0) > 0.3).nonzero():
                h[:, e[0]] = h[:, e[0]] * 0.5
        return h - 1


@pytest.mark.parametrize("make", [HalvesSelectedColumnsWhenRare, PrintsOrHalvesWhenRare])
def test_a_loop_over_a_mask_in_an_arm_no_example_took_is_rewritten(make):
    x = torch.linspace(-1, 1, 8).reshape(2, 4)
    model = make()
    program = stitch.export(model, (x,), examples=[((x - 1,), {})])
    assert any("loop over nonzero()" in d.reason for d in program.report.decisions), \
        str(program.report)
    for inp in (x, x + 5, torch.zeros(2, 4), x * 0):
        torch.testing.assert_close(program(inp), model(inp))


# a fuzz program (tests/fuzz): the loop sits in the else of an `elif` under a branch with
# prints; torch.export is the first to trace its arm
FOUND_BY_FUZZER = """\
        h = torch.tanh(self.l0(x)) + x * 0.1
        s1 = h.abs().mean().item()
        h = h / (s1 + 1.0)
        if float(h.mean()) > -0.1:
            v3 = h[:2]
            h[:, 1] += 1.0
            print('i3', v3.sum())
            print('p4', h.mean())
        elif h.abs().mean().item() > 0.0 or h.mean() < 0.1:
            h = self.sub(h)
        else:
            for e5 in (h.mean(0) > 0.3).nonzero():
                h[:, e5[0]] = h[:, e5[0]] * 0.5 + self.l1.bias[e5[0]]
            h = -h
        v7 = h[:2]
        h.add_(0.5)
        print('i7', v7.sum())
        return h
"""


def test_a_loop_over_a_mask_first_traced_by_torch_export_is_rewritten(tmp_path):
    from tests.zoo import fuzz

    module = fuzz.load_program(fuzz.HEADER + FOUND_BY_FUZZER, str(tmp_path))
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(1))
    program = stitch.export(module.Fuzz(), (x,), examples=[((x * 4 + 2,), {})])
    assert any("loop over nonzero()" in d.reason for d in program.report.decisions), \
        str(program.report)
    for i in (x, x * 0.01, -x * 4 - 2, torch.zeros(4, 8)):
        with contextlib.redirect_stdout(io.StringIO()) as got, torch.no_grad():
            mine = program(i)
        with contextlib.redirect_stdout(io.StringIO()) as want, torch.no_grad():
            theirs = module.Fuzz()(i)
        torch.testing.assert_close(mine, theirs)
        assert got.getvalue() == want.getvalue()


class EqualInATry(nn.Module):
    """``torch.equal`` read as a Python bool in a ``try`` after a print: Dynamo runs the
    frame as Python (a break inside ``try``), so only torch.export meets the read, and
    names it by its exception class (DataDependentOutputException)."""

    def __init__(self) -> None:
        super().__init__()
        self.h = None

    def forward(self, h):
        try:
            print(f"mean={h.mean().item():.2f}")
            if torch.equal(h, h.abs()):
                raise ValueError("all positive")
            self.h = h * 2.0
        except ValueError:
            self.h = h - 1.0
        return h + self.h


def test_an_op_whose_python_result_is_data_found_by_export_becomes_a_cond():
    model = EqualInATry()
    pos, mixed = torch.rand(2, 4) + 0.1, torch.randn(3, 4)
    program = stitch.export(model, (pos,), examples=[((mixed,), {})])
    found = [d for d in program.report.decisions  # E1, or R2.E1 when found after round 1
             if d.site.rpartition(".")[2].startswith("E")]
    assert found, program.report.decisions
    for x in (pos, mixed, torch.rand(3, 4) + 0.1, -torch.rand(3, 4)):
        want_text, got_text = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(want_text):
            want = model(x)
        want_h = model.h
        with contextlib.redirect_stdout(got_text):
            got = program(x)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(model.h, want_h)
        assert got_text.getvalue() == want_text.getvalue()
