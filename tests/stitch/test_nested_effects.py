"""Side effects in a data-dependent branch nested inside another: the inner cond logs its
calls into the enclosing branch's log, each with a guard that is true only when every
branch around it ran; the outermost branch hands them to the epilogue in the order the
model made them. Checked against the model on inputs taking every combination of sides,
including sides no example took (verification forces them)."""

from __future__ import annotations

import copy
import logging

import pytest
import torch
from check_models import said
from torch import nn

import stitch
from stitch.plan import Action

log = logging.getLogger("stitch.tests.nested_effects")


class _Linear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)


class ThreeLevelsInALoop(_Linear):
    """Three levels of branches, the middle one in a Python loop: a call per iteration."""

    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0:
            print("level 1", h.sum())
            for i in range(2):
                if h.mean() > i:
                    log.warning("level 2, pass %d: %s", i, h.mean())
                    if h.max() > 3:
                        print("level 3", h.max())
                        h = h / 2
                    h = h + 0.5
            print("level 1 done", h.min())
        return h


class ReturnsFromNested(_Linear):
    """The nested branch returns early, with a print on each way out."""

    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0:
            if h.max() > 2:
                print("large", h.max())
                return h * 3
            print("positive", h.sum())
            return h
        print("negative", h.sum())
        return -h


class BufferInNested(_Linear):
    """The nested branch prints and updates a buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0:
            if h.max() > 2:
                print("count before", self.count)
                self.count += 1
            h = h + self.count
        return h


class PythonValuedPredicate(_Linear):
    """``tensor and self.flag``: with the flag off the predicate is a Python False while
    exporting, so the outer branch is plain Python and the nested one is the graph's."""

    def __init__(self) -> None:
        super().__init__()
        self.flag = False

    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0 and self.flag:
            h = h * 2
        else:
            print("else", h.max())
            if h.mean() > 0:
                print("inner", h.min())
                h = h + 1
            print("end", h.sum())
        return h


class EffectsAfterAFlag(nn.Module):
    """A flag whose `if`s continue the function (``v`` bound on one side only), then an
    if/elif/else with effects on every side, one writing in place what it printed a view of,
    and Python numbers returned: under torch.compile (the census) each arm's continuation
    recompiles with one tensor under two names (the value and the object held before the
    `if`), and Dynamo's recompile reason for that aliasing can raise IndexError out of the
    run."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x):
        h = torch.tanh(self.lin(x)) + x * 0.1
        n, scale = 0, 1.0
        f = h.mean() > 0.1
        if f:
            v = h + self.count
        if f:
            h = h + v * 0.5
        if not f:
            h = h - 0.25
        h = h * (1.5 if f else 0.5)
        if (h.max() > 0.1) and (h.min() < 0.0):
            log.warning("mixed %.4f", h.sum())
            self.count += 1
        elif h.mean() > 0.3:
            h = torch.sigmoid(h) - 0.5
        else:
            v7 = h[:1]
            h.add_(0.5)
            print("low", v7.sum())
            log.warning(f"low {h.mean().item():.3f} {h.sum():.2f}")
        return h * (1.0 + 0.1 * n) * scale, n, scale


INPUTS = [torch.randn(2, 4, generator=torch.Generator().manual_seed(0)) * s
          for s in (1.0, -1.0, 5.0, -5.0, 0.1)] + [torch.full((2, 4), 3.0),
                                                    torch.full((2, 4), -3.0)]


def _said(fn, x, caplog):
    return said(fn, x, caplog, log.name)


def _export_and_compare(cls, caplog) -> stitch.StitchedProgram:
    """Export with the first three inputs as examples; the program equals a fresh model,
    call after call (state carried), on every input: values, printed and logged text."""
    torch.manual_seed(0)
    model = cls().eval()
    reference = copy.deepcopy(model)
    program = stitch.export(model, (INPUTS[0],), examples=[((x,), {}) for x in INPUTS[1:3]])
    assert program.report.graphs_after == 1 and program.report.breaks_after == 0
    assert Action.GUARD not in {d.action for d in program.report.decisions}
    said = []
    for x in INPUTS:
        got, got_out, got_logs = _said(program, x, caplog)
        want, want_out, want_logs = _said(reference, x, caplog)
        torch.testing.assert_close(got, want)
        assert (got_out, got_logs) == (want_out, want_logs)
        said.append(want_out + "".join(want_logs))
    assert len(set(said)) > 2, "the inputs must take different sides"
    return program


def test_three_levels_in_a_loop_replay_in_order(caplog):
    program = _export_and_compare(ThreeLevelsInALoop, caplog)
    assert program.report.graph_ops.get("cond", 0) >= 3
    outer = [d for d in program.report.decisions if d.action == Action.COND
             and "nested in it" in d.reason]
    assert len(outer) == 2  # the outermost branch and the middle one
    # the innermost `if` no example reached in the first census is found in the second
    assert any(d.site.startswith("R2.") for d in program.report.decisions)


def test_nested_branch_that_returns_early(caplog):
    program = _export_and_compare(ReturnsFromNested, caplog)
    assert program.report.graph_ops.get("cond") == 2


def test_nested_branch_updating_a_buffer(caplog):
    program = _export_and_compare(BufferInNested, caplog)
    count = next(v for k, v in program.exported_program.named_buffers() if k.endswith("count"))
    assert count.item() == 0  # verification ran on copies


def test_effects_after_a_flag_continuation(caplog):
    torch.manual_seed(0)
    model = EffectsAfterAFlag()
    reference = copy.deepcopy(model)
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(1))
    program = stitch.export(model, (x,), examples=[((x * 4 + 2,), {})])
    assert Action.GUARD not in {d.action for d in program.report.decisions}
    assert program.report.graph_ops.get("cond", 0) >= 3
    said = set()
    for xi in (x, x * 4 + 2, -x, x * 0.1, -x * 4 - 2):
        got, got_out, got_logs = _said(program, xi, caplog)
        want, want_out, want_logs = _said(reference, xi, caplog)
        torch.testing.assert_close(got, want)
        assert (got_out, got_logs) == (want_out, want_logs)
        said.add(want_out + "".join(want_logs))
    assert len(said) > 1


def test_outer_predicate_that_is_a_python_value_while_exporting(caplog):
    program = _export_and_compare(PythonValuedPredicate, caplog)
    assert program.report.graph_ops.get("cond") == 1


class PrintsWhenPositive(_Linear):
    def forward(self, h):
        h = self.lin(h)
        if h.mean() > 0:
            print("inner module", h.max())  # a call stitch cannot defer across a call
            h = h * 2
        return h


class CallsABranchWithEffects(_Linear):
    def __init__(self) -> None:
        super().__init__()
        self.inner = PrintsWhenPositive()

    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0:
            print("outer", h.sum())
            h = self.inner(h)
        return h


def test_branch_with_effects_in_a_called_function_is_refused_naming_the_call():
    """Not nested in the same function: the nested call cannot reach the enclosing
    branch's log. Refused, naming the call's line; nothing wrong is returned."""
    torch.manual_seed(0)
    model = CallsABranchWithEffects().eval()
    line = next(i for i, text in enumerate(open(__file__).read().splitlines(), 1)
                if "a call stitch cannot defer across a call" in text)
    with pytest.raises(stitch.StitchError, match=rf"test_nested_effects.py:{line}\).*not "
                       "across a call"):
        stitch.export(model, (INPUTS[0],), examples=[((x,), {}) for x in INPUTS[1:3]])


class PrintsPerIteration(_Linear):
    def forward(self, x, n):
        h = self.lin(x)
        for _ in range(int(n.item())):
            print("step", h.mean())  # per iteration: while_loop cannot return these
            h = h * 0.5
        return h


class PrintsPerIterationInABranch(_Linear):
    def forward(self, x, n):
        h = self.lin(x)
        if h.sum() > 0:
            for _ in range(int(n.item())):
                if h.mean() > 0:
                    print("shrink", h.mean())  # per iteration: while_loop cannot return these
                    h = h * 0.5
        return h


@pytest.mark.parametrize("cls", [PrintsPerIteration, PrintsPerIterationInABranch])
def test_effects_in_a_tensor_counted_loop_are_refused_naming_the_call(cls):
    """A while_loop carries fixed-shape values: calls made per iteration have nowhere to go.
    The loop is left, with the reason and the call's line; a branch around it is not made
    a cond that would hide the loop's break."""
    torch.manual_seed(0)
    model = cls().eval()
    source = open(__file__).read().splitlines()
    first = next(i for i, t in enumerate(source, 1) if f"class {cls.__name__}(" in t)
    line = next(i for i, t in enumerate(source, 1) if i > first and "per iteration:" in t)
    x = INPUTS[0]
    with pytest.raises(stitch.UnfixableBreaksError,
                       match=rf"print/log/warn/append calls \(\S*test_nested_effects.py:"
                             rf"{line}\): torch.while_loop"):
        stitch.export(model, (x, torch.tensor(2)),
                      examples=[((-x, torch.tensor(3)), {}), ((x * 5, torch.tensor(1)), {})])
