"""A backend is checked on the examples run twice, in order, when the graph has buffers: a
backend that loses the graph's buffer updates between calls is refused, and ``auto`` does
not deploy it (torch 2.14.1's AOTInductor kept a 0-d buffer's ``+= 1`` for one call only:
every later call computed with n=1)."""

from __future__ import annotations

import pytest
import torch

import stitch


class CountsInABuffer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("n", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        self.n += 1
        h = self.lin(x) * self.n
        if h.sum() > 0:
            print("positive")
        return h


@pytest.mark.slow
def test_a_backend_that_drops_buffer_updates_between_calls_is_not_deployed(capsys):
    torch.manual_seed(0)
    model = CountsInABuffer()
    reference = CountsInABuffer()
    reference.load_state_dict(model.state_dict())
    program = stitch.export(model, (torch.randn(4, 4),))  # one example: one run hid it
    with pytest.raises(stitch.VerificationError, match="second run of example 0"):
        stitch.compile(program, "aoti")
    deployed = stitch.compile(program, "auto", candidates=["aoti"])
    assert deployed.decision.chosen != "aoti", deployed.decision
    for _ in range(3):
        x = torch.randn(4, 4).abs()
        torch.testing.assert_close(deployed(x), reference(x))
    capsys.readouterr()
