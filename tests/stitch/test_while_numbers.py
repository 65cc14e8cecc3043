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
