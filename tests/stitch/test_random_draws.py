"""A forward that draws from Python's ``random`` or numpy's global generator: torch.export
would freeze the draws into the program as constants. stitch refuses, naming each line."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

import stitch


class PythonDraw(torch.nn.Module):
    def forward(self, x):
        if random.random() < 0.5:
            x = x * 2
        return x + random.gauss(0, 1)


class NumpyDraw(torch.nn.Module):
    def forward(self, x):
        order = np.random.permutation(x.shape[1])
        return x[:, torch.as_tensor(order)]


class TorchDraw(torch.nn.Module):
    def forward(self, x):
        return x + torch.randn_like(x)  # in the graph: fine


@pytest.mark.parametrize("model, generator, line", [
    (PythonDraw(), "Python's `random`", "random.random()"),
    (NumpyDraw(), "numpy's global generator", "np.random.permutation")])
def test_a_python_level_draw_is_refused_with_its_line(model, generator, line):
    x = torch.randn(2, 4)
    state = random.getstate(), np.random.get_state()[1].copy()
    with pytest.raises(stitch.UnsupportedSideEffectError, match=generator) as refused:
        stitch.export(model, (x,), examples=[((x * 2,), {})])
    lines = open(__file__).read().splitlines()
    named = [int(loc.rsplit(":", 1)[1]) for loc in str(refused.value).split()
             if loc.startswith(__file__ + ":")]
    assert any(line in lines[n - 1] for n in named)
    assert random.getstate() == state[0]  # analysis put the generators back
    assert (np.random.get_state()[1] == state[1]).all()


def test_a_torch_draw_stays_in_the_graph():
    torch.manual_seed(0)
    program = stitch.export(TorchDraw(), (torch.zeros(2, 4),))
    torch.manual_seed(1)
    first = program(torch.zeros(2, 4))
    assert not torch.equal(first, program(torch.zeros(2, 4)))
