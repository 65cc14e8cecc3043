"""A data-dependent ``if`` inside a loop a rewrite made a function of (``__stitch_body_``:
a loop counted by a tensor, a loop over a tensor's rows): the ``if`` becomes a
``torch.cond`` inside the loop's body (``branch_to_cond`` descends into such bodies), so
the break does not stay and the model is not refused."""

from __future__ import annotations

import torch
from torch import nn

import stitch
from stitch.plan import Action


class BranchEachStep(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, h, n):
        for _ in range(int(n.item())):  # counted by a tensor: a torch.while_loop
            h = self.lin(h)
            if h.sum() > 0:  # on the step's data
                h = h - 1
            else:
                h = h * 2
        return h


def test_a_branch_in_a_tensor_counted_loop_is_a_cond_in_its_body():
    torch.manual_seed(0)
    model = BranchEachStep().eval()
    program = stitch.export(model, (torch.randn(2, 4), torch.tensor(3)),
                            examples=[((torch.randn(2, 4), torch.tensor(2)), {})])
    assert program.report.graphs_after == 1, str(program.report)
    actions = {d.action for d in program.report.decisions}
    assert Action.WHILE_LOOP in actions, str(program.report)
    assert actions & {Action.COND, Action.WHERE}, str(program.report)
    for k in range(6):  # trip counts no example had, both sides of the test taken
        for scale in (3.0, -3.0):
            args = (torch.randn(2, 4) * scale, torch.tensor(k))
            torch.testing.assert_close(program(*args), model(*args), rtol=0, atol=0)


class BranchInTensorWhile(nn.Module):
    """The same `if`, in a `while` on a tensor (tensor_while's body function)."""

    def forward(self, h):
        steps = torch.zeros((), dtype=torch.int64)
        while h.abs().sum() > 1.0 and steps < 5:
            if h.sum() > 0:
                h = h * 0.5
            else:
                h = h * 0.25
            steps = steps + 1
        return h, steps


def test_a_branch_in_a_tensor_while_is_a_cond_in_its_body():
    model = BranchInTensorWhile()
    program = stitch.export(model, (torch.randn(2, 4) * 3,),
                            examples=[((torch.randn(2, 4) * 3,), {})])
    assert program.report.graphs_after == 1, str(program.report)
    assert {d.action for d in program.report.decisions} & {Action.COND, Action.WHERE}
    for scale in (0.1, 3.0, -3.0, 20.0):
        args = (torch.randn(2, 4) * scale,)
        for got, want in zip(program(*args), model(*args), strict=True):
            torch.testing.assert_close(got, want, rtol=0, atol=0)
