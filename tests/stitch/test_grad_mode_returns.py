"""An early ``return`` inside ``with torch.no_grad():`` (or ``enable_grad``,
``set_grad_enabled``) whose other side falls through past the block: the rest after the
block joins each arm that falls through, after grad mode is set back as the block's exit
sets it (``continuation.lift_continuations``). It was refused: "one branch returns and the
other falls through to the end of the function"."""

from __future__ import annotations

import torch

import stitch


class ReturnsInNoGrad(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        with torch.no_grad():
            s = self.lin(x).sum()
            if s > 0:
                return self.lin(x).softmax(-1)
            y = self.lin(x).sigmoid()
        return y * 2 + self.lin(x)


def test_a_return_inside_a_grad_mode_block_is_a_cond():
    torch.manual_seed(0)
    model = ReturnsInNoGrad()
    xs = [torch.randn(4, 3) for _ in range(40)]
    pos = [x for x in xs if model.lin(x).sum() > 0]
    neg = [x for x in xs if model.lin(x).sum() <= 0]
    program = stitch.export(model, (pos[0],), examples=[((neg[0],), {})])
    assert any(d.action.name == "COND" for d in program.report.decisions)
    with torch.no_grad():
        for x in pos[:3] + neg[:3]:
            torch.testing.assert_close(program(x), model(x))
    # grad mode after the block is the caller's: the rest's own op records a graph
    with torch.enable_grad():
        assert model(neg[1]).requires_grad
        torch.testing.assert_close(program(neg[1]), model(neg[1]))
