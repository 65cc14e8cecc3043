"""A ``while`` on a tensor that also counts in Python (adaptive computation time:
``while bool((halted < 0.99).any()) and steps < 6: ...; steps += 1``): the Python int is
carried through ``torch.while_loop`` as a 0-d tensor and read back as an int, also when
only the parameters the body reads need grad."""

from __future__ import annotations

import torch

import stitch


class Adaptive(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.step = torch.nn.Linear(4, 4)
        self.halt = torch.nn.Linear(4, 1)

    def forward(self, x):
        halted = torch.zeros(x.shape[0])
        steps = 0
        while bool((halted < 0.99).any()) and steps < 6:
            x = self.step(x).tanh()
            halted = halted + torch.sigmoid(self.halt(x)).squeeze(-1)
            steps += 1
        return x, halted, steps


def test_a_python_counter_in_a_tensor_while_is_carried_and_exact():
    torch.manual_seed(0)
    model = Adaptive()
    program = stitch.export(model, (torch.randn(2, 4),), examples=[((torch.randn(3, 4) * 5,), {})])
    assert program.report.graph_ops.get("while_loop") == 1, str(program.report)
    seen_steps = set()
    for k in range(6):
        x = torch.randn(k + 1, 4) * (k - 2)
        want, got = model(x), program(x)
        torch.testing.assert_close(got[:2], want[:2])
        assert got[2] == want[2] and isinstance(got[2], int)
        seen_steps.add(want[2])
    assert len(seen_steps) > 1  # the inputs stop the loop after different counts


class HalvedInABranch(torch.nn.Module):
    """A float halved by a ``while`` on data, inside a data-dependent ``if``: the loop is a
    ``torch.while_loop`` inside the cond's arm."""

    def forward(self, x):
        h = x * 1.5
        s = 1.0
        if h[:, -1].max() > -5.0:
            k = 0
            while 0 < h.mean().item() < 1 and k < 3:
                s = s * 0.5
                h = h - 1.0
                k += 1
        else:
            h = -h
        return h * s, s


def test_a_number_a_loop_in_an_arm_carries_is_the_loop_s_not_the_traced_one():
    """Carried as a 0-d tensor made from a Python value, the number was a constant to torch,
    and the arm's trace read the loop's result as the value of the example traced (one
    iteration: 0.5), also where the loop does not run; the examples took one iteration and
    the other side of the ``if``, so verification could not see it."""
    model = HalvedInABranch()
    once = torch.full((4, 8), 0.4)  # mean 0.6: one iteration
    general_side = torch.full((4, 8), -20.0)  # the else branch
    program = stitch.export(model, (once,), examples=[((general_side,), {})])
    for x in (torch.full((4, 8), -0.3), torch.full((4, 8), 0.5), once, general_side):
        want, got = model(x), program(x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1], (x[0, 0].item(), got[1], want[1])


class FlaggedInABranch(torch.nn.Module):
    """A bool set by a ``while`` on data inside a data-dependent ``if``, returned."""

    def forward(self, x):
        h = x * 1.5
        flag = False
        if h[:, -1].max() > -5.0:
            k = 0
            while (h.sum() > 0 and h.max().item() < 3.0) and k < 3:
                flag = True
                h = h - 1.0
                k += 1
        else:
            h = -h
        return h, flag


def test_a_bool_a_loop_in_an_arm_carries_stays_a_bool():
    """torch.while_loop carries a Python bool as an int (int64, which the cond around the
    loop cannot merge with the other arm's bool): it travels as a 0-d bool tensor and comes
    back a bool."""
    model = FlaggedInABranch()
    runs, general_side = torch.full((4, 8), 0.4), torch.full((3, 8), -20.0)
    program = stitch.export(model, (runs,), examples=[((general_side,), {})])
    assert program.report.graphs_after == 1
    for x in (runs, general_side, torch.full((2, 8), 1.5), torch.full((3, 8), -0.1)):
        want, got = model(x), program(x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1] and isinstance(got[1], bool), (got[1], want[1])


class FlaggedLoop(torch.nn.Module):
    """A bool set by a ``while`` on data at the top of a forward (no branch around it)."""

    def forward(self, h):
        flag = False
        k = 0
        while (h > 0).all() and k < 3:
            flag = True
            h = h - 1.0
            k += 1
        return h, flag


class Outer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = FlaggedLoop()

    def forward(self, x):
        return self.inner(x * 1.5)


def test_a_bool_a_loop_carries_does_not_break_the_census():
    """Under Dynamo's census (scalar reads not captured), the bool comes back from the loop
    as Dynamo's while_loop carries it: reading a 0-d tensor back would be a break there,
    one no rewrite removes."""
    model = Outer()
    runs, stays = torch.full((4, 8), 1.0), torch.full((3, 8), -1.0)
    program = stitch.export(model, (runs,), examples=[((stays,), {})])
    assert program.report.graphs_after == 1
    for x in (runs, stays, torch.full((2, 8), 0.5), torch.full((3, 8), 9.0)):
        want, got = model(x), program(x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1] and isinstance(got[1], bool), (got[1], want[1])
