"""Side effects in a branch that returns early, or inside if blocks of a branch:
deferred like any branch effect, replayed exactly when their branch ran and the call was
reached; inside Python-level loops of a branch, once per iteration, in the order made. A
call that is not a statement of its own (inside a comprehension) is refused with the line."""

from __future__ import annotations

import contextlib
import io
import logging
import warnings

import pytest
import torch
from check_models import said
from torch import nn

import stitch

log = logging.getLogger("stitch.tests.branch_effects")


class ReturnsEarly(nn.Module):
    def __init__(self, skip: bool) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.skip = skip  # a Python flag: when set, the branch returns before its print

    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0:
            log.warning("positive sum %s", h.sum())
            if self.skip:
                return h
            print("early", h.max())
            return h * 2
        print("late", h.min())
        return h - 1


def _said(fn, x, caplog):
    return said(fn, x, caplog, log.name)


@pytest.mark.parametrize("skip", [False, True])
def test_early_return_branch_with_print_and_log_is_one_graph_matching_the_model(skip, caplog):
    torch.manual_seed(0)
    model = ReturnsEarly(skip).eval()
    x = torch.randn(2, 8)
    sign = 1 if model.lin(x).sum() > 0 else -1
    pos, neg = x * sign * 4, -x * sign * 4
    assert model.lin(pos).sum() > 0 > model.lin(neg).sum()
    program = stitch.export(model, (neg,), examples=[((pos,), {})])
    assert program.report.graph_ops.get("cond") == 1
    assert program.report.breaks_after == 0
    decision = next(d for d in program.report.decisions if d.action == "torch.cond")
    assert "early return" in decision.reason and "deferred to the epilogue" in decision.reason
    for inp in (pos, neg):
        got, got_out, got_logs = _said(program, inp, caplog)
        want, want_out, want_logs = _said(model, inp, caplog)
        torch.testing.assert_close(got, want)
        assert (got_out, got_logs) == (want_out, want_logs)
        assert want_out or want_logs  # each side says something
    _, out, _ = _said(program, pos, caplog)
    assert ("early" in out) is (not skip)


class NestedInBlocks(nn.Module):
    def __init__(self, verbose: bool) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.verbose = verbose  # Python-level: decides whether the inner print is reached

    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0:
            if self.verbose:
                print("positive", h.max())
            else:
                log.warning("quiet %s", h.min())
            if h.dim() == 2:  # a static shape test: Python-level too
                print("two-d", h.mean())
            h = h * 2
        else:
            h = h - 1
        return h


class EffectsInLoops(nn.Module):
    """Calls in Python-level loops of a branch: logged per iteration, replayed in order
    (print and log interleaved as made)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0:
            for i in range(2):
                print("row", i, h[i].sum())
                log.warning("row %d max %s", i, h[i].max())
            h = h * 2
        else:
            k = 0
            while k < 3:
                print("negative", k, h[0, k])
                k += 1
        return h


class PrintsInAComprehension(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0:
            _ = [print("row", i) for i in range(2)]
            h = h * 2
        return h


def _both_sides(model):
    x = torch.randn(2, 8, generator=torch.Generator().manual_seed(1))
    sign = 1 if model.lin(x).sum() > 0 else -1
    pos, neg = x * sign * 4, -x * sign * 4
    assert model.lin(pos).sum() > 0 > model.lin(neg).sum()
    return pos, neg


@pytest.mark.parametrize("verbose", [False, True])
def test_effects_inside_if_blocks_of_a_branch(verbose, caplog):
    torch.manual_seed(0)
    model = NestedInBlocks(verbose).eval()
    pos, neg = _both_sides(model)
    program = stitch.export(model, (neg,), examples=[((pos,), {})])
    assert program.report.graph_ops.get("cond") == 1 and program.report.breaks_after == 0
    for inp in (pos, neg):
        got, got_out, got_logs = _said(program, inp, caplog)
        want, want_out, want_logs = _said(model, inp, caplog)
        torch.testing.assert_close(got, want)
        assert (got_out, got_logs) == (want_out, want_logs)
    _, out, logs = _said(program, pos, caplog)
    assert ("positive" in out) is verbose and bool(logs) is (not verbose)
    assert "two-d" in out


def test_effects_in_loops_inside_a_branch_replay_per_iteration_in_order(caplog):
    torch.manual_seed(0)
    model = EffectsInLoops().eval()
    pos, neg = _both_sides(model)
    program = stitch.export(model, (neg,))  # the example takes the else side only
    assert program.report.graph_ops.get("cond") == 1 and program.report.breaks_after == 0
    assert any("forced true" in c.what for c in program.report.checks)
    for inp in (pos, neg, pos):
        got, got_out, got_logs = _said(program, inp, caplog)
        want, want_out, want_logs = _said(model, inp, caplog)
        torch.testing.assert_close(got, want)
        assert (got_out, got_logs) == (want_out, want_logs)
    caplog.clear()
    out = io.StringIO()
    with contextlib.redirect_stdout(out), caplog.at_level(logging.WARNING, logger=log.name):
        program(pos)
    assert [ln.split()[:2] for ln in out.getvalue().splitlines()] == [["row", "0"], ["row", "1"]]
    assert [r.getMessage().split()[:2] for r in caplog.records] == [["row", "0"], ["row", "1"]]


def test_an_effect_not_made_as_a_statement_is_not_deferred_and_says_why():
    """The branch cannot become a cond: it is specialised to example 0's side (guarded),
    the report gives the reason with the line, and the other side is refused at run time."""
    torch.manual_seed(0)
    model = PrintsInAComprehension().eval()
    pos, neg = _both_sides(model)
    with pytest.raises(stitch.GuardsRefusedError, match="not a statement of its own"):
        stitch.export(model, (neg,), examples=[((pos,), {})])  # guards only on request
    program = stitch.export(model, (neg,), examples=[((pos,), {})],
                            settings=stitch.Settings(allow_guards=True))
    decision = next(d for d in program.report.decisions if d.action == "guarded")
    assert "not a statement of its own" in decision.reason, decision.reason
    assert f"{__file__}:" in decision.reason
    with pytest.raises(stitch.SpecializationError):
        program(pos)


def announce(x, k):
    print("called with", k, tuple(x.shape))
    return x


class OnlyCalls(nn.Module):
    """Arms that only call a function with an effect, passing the input itself: each arm's
    deferred call carries the input (and its dynamic size) out of the cond."""

    def forward(self, x):
        if x.sum() > 0:
            announce(x, 1)
        else:
            announce(x, 2)
        return x * 2


def test_arms_that_only_call_with_the_input_on_dynamic_sizes():
    model = OnlyCalls()
    program = stitch.export(model, (torch.ones(2, 3),), examples=[((-torch.ones(3, 3),), {})])
    assert program.report.graphs_after == 1
    for x in (torch.ones(4, 3), -torch.ones(5, 3)):
        for run in (model, program):
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                y = run(x)
            torch.testing.assert_close(y, x * 2)
            assert out.getvalue() == f"called with {1 if x.sum() > 0 else 2} {tuple(x.shape)}\n"


def _warn_clipped(x):
    if (x > 3).any():
        warnings.warn(f"{int((x > 3).sum())} values clipped", RuntimeWarning, stacklevel=2)
    return x.clamp(max=3)


class WarnsAtLevels(nn.Module):
    """``warnings.warn(..., stacklevel=k)`` in a branch: in the forward itself (level 2 is
    torch's module call) and in a helper (level 2 is the forward's line calling it)."""

    def forward(self, x):
        if x.sum() > 0:
            warnings.warn("sum above zero", UserWarning, stacklevel=2)
        return _warn_clipped(x) * 2


def test_a_warning_in_a_branch_is_attributed_as_its_stacklevel_says():
    """Replayed warnings keep eager's file and line for a ``stacklevel`` over 1: they were
    attributed to the ``warn`` call's own line, and verification then compared a warning
    eager attributes to torch's module call (not the model's) with one the program made at
    the model's line, and refused."""
    model = WarnsAtLevels()
    sides = [torch.tensor([1.0, 5.0]), torch.tensor([-4.0, 1.0]), torch.tensor([2.0, 2.0])]
    program = stitch.export(model, (sides[0],), examples=[((sides[1],), {})])

    def warned(fn):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for x in sides:
                fn(x)
        return [(w.category, str(w.message), w.filename, w.lineno) for w in caught]

    eager = warned(model)
    assert [m for _c, m, _f, _l in eager] == ["sum above zero", "1 values clipped",
                                             "sum above zero"]
    assert eager[1][2] == __file__  # the helper's warning points at the forward's line
    assert warned(program) == eager


class LogsToAFetchedLogger(nn.Module):
    """A logger fetched at the call, in a branch inside a loop that breaks (the branch is a
    cond nested in the loop's own)."""

    def forward(self, h):
        for _ in range(3):
            h = h * 0.9
            if (h > 2.0).any():
                logging.getLogger("tests.fetched").warning("rows %s", list(h.shape))
                break
        return h


def test_a_logger_fetched_in_a_branch_logs_as_eager(caplog):
    """``logging.getLogger(name).warning(...)`` in a branch: the logger is named when the
    call is recorded, not fetched inside the cond (Dynamo cannot trace ``getLogger``; the
    export failed with torch's UncapturedHigherOrderOpError)."""
    model = LogsToAFetchedLogger()
    program = stitch.export(model, (torch.full((4, 2), 3.0),),
                            examples=[((torch.full((3, 2), 0.1),), {})])
    for x in (torch.full((5, 2), 3.0), torch.full((2, 2), 0.1), torch.full((3, 2), 2.3)):
        with caplog.at_level(logging.WARNING, logger="tests.fetched"):
            caplog.clear()
            want = model(x)
            eager = [(r.name, r.getMessage()) for r in caplog.records]
            caplog.clear()
            torch.testing.assert_close(program(x), want)
            assert [(r.name, r.getMessage()) for r in caplog.records] == eager
    assert eager == [("tests.fetched", "rows [3, 2]")]
