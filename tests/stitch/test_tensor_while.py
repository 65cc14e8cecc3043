"""``while`` on a tensor condition becomes one torch.while_loop (it broke the graph on every
iteration and torch.export refused it): iterative refinement until a residual is small."""

import pytest
import torch

import stitch


class Halve(torch.nn.Module):
    """Halves until the norm is at most 1, counting steps (a Python int and a tensor)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        h, steps = x, 0
        budget = torch.zeros((), dtype=torch.int64)
        while h.norm() > 1.0 and budget < 30:
            h = h * 0.5
            steps += 1
            budget = budget + 1
        return self.lin(h), steps


class HalveAfterLinear(torch.nn.Module):
    """The carried tensor needs grad (a Linear made it), and a Python int is carried beside
    it: torch.while_loop's autograd path takes tensors only."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        h, steps = self.lin(x), 0
        while h.abs().max() > 0.5:
            h = h * 0.5
            steps += 1
        return h, steps


class ShrinkInPlace(torch.nn.Module):
    def forward(self, x):
        h = x.clone()
        while h.abs().max() > 1.0:
            h.mul_(0.5)  # written in place: carried like a write in a branch
        return h


class Prints(torch.nn.Module):
    def forward(self, x):
        h = x
        while h.norm() > 1.0:
            h = h * 0.5
            print("halved")  # once per iteration: nothing the epilogue could replay
        return h


class ReadsAfter(torch.nn.Module):
    def forward(self, x):
        h = x
        while h.norm() > 1.0:
            last = h
            h = h * 0.5
        return h + last  # first bound in the body (unbound if no iteration ran)


X = torch.randn(4, 8, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("cls", [Halve, HalveAfterLinear, ShrinkInPlace])
def test_a_tensor_while_is_one_while_loop_that_runs_as_eager(cls):
    model = cls().eval()
    program = stitch.export(model, (X * 3,), examples=[((X * 0.01,), {})])
    assert program.report.graph_ops == {"while_loop": 1}
    assert program.report.breaks_after == 0
    for scale in (0.001, 2.0, 50.0, 1e4):  # none to many iterations, none seen as such
        got, want = program(X * scale), model(X * scale)
        torch.testing.assert_close(got, want)
        if cls in (Halve, HalveAfterLinear):
            assert type(got[1]) is int and got[1] == want[1]  # the count comes back an int


@pytest.mark.parametrize("cls, why", [
    (Prints, "print/log/warn/append calls"),
    (ReadsAfter, "last bound in the loop is read after it"),
])
def test_a_while_that_cannot_be_one_loop_is_refused_saying_why(cls, why):
    with pytest.raises(stitch.StitchError, match=why):  # both examples iterate
        stitch.export(cls().eval(), (X * 3,), examples=[((X * 5,), {})])


def _unconverged(h, tol):
    return (h.abs() > tol).any()


class HelperCondition(torch.nn.Module):
    """The condition through a helper function and another receiver name."""

    def forward(self, state):
        while _unconverged(state, 1.0):
            state = state * 0.5
        return state


def test_a_while_whose_condition_is_a_helper_call_is_one_while_loop():
    model = HelperCondition()
    program = stitch.export(model, (X * 3,), examples=[((X * 0.01,), {})])
    assert program.report.graph_ops == {"while_loop": 1}
    for scale in (0.001, 7.0, 300.0):
        torch.testing.assert_close(program(X * scale), model(X * scale))


class ExitThenHalve(torch.nn.Module):
    """A `while` after an early-exit loop: Dynamo runs the frame's rest in Python after the
    loop's break, so no census sees the `while`; torch.export meets it, and the site it
    names is rewritten too."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(2))

    def forward(self, x):
        h = x
        for layer in self.layers:
            h = torch.tanh(layer(h)) + h * 0.5
            if float(h.mean()) > -0.1:
                print("exit", h.mean())
                break
            print("on", h.sum())
        while h.abs().max() > 0.5:
            h = h * 0.5
        return h


def test_a_while_only_torch_export_meets_is_rewritten_too(capsys):
    torch.manual_seed(0)
    model = ExitThenHalve().eval()
    program = stitch.export(model, (X,), examples=[((X * 3,), {})])
    assert program.report.graph_ops.get("while_loop") == 1, program.report.graph_ops
    capsys.readouterr()
    for scale in (0.01, 1.0, 5.0, -4.0):
        with torch.no_grad():  # printed tensors show no grad_fn (docs/guarantees.md)
            want = model(X * scale)
            said = capsys.readouterr().out
            torch.testing.assert_close(program(X * scale), want)
        assert capsys.readouterr().out == said
