"""A forward that draws from Python's ``random`` or numpy's global generator: torch.export
would freeze the draws into the program as constants. Where an output or text depends on
the number, stitch refuses, naming each line; where none does (LayerDrop's draw, used only
in training), the epilogue makes the same draws, so the generator advances as in eager."""

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


class LayerDrop(torch.nn.Module):
    """transformers' LayerDrop (VITS, MusicGen): a draw on every call, used in training."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(2))
        self.layerdrop = 0.1

    def forward(self, x):
        for layer in self.layers:
            dropout_probability = np.random.uniform(0, 1)
            if self.training and dropout_probability < self.layerdrop:
                continue
            x = layer(x)
        return x


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


def test_a_draw_no_output_depends_on_is_made_again_after_the_graph():
    x = torch.randn(2, 4)
    model = LayerDrop().eval()
    program = stitch.export(model, (x,), examples=[((x * 2,), {})])
    assert any("np.random" in n or "numpy.random.uniform" in n for n in program.report.notes)
    np.random.seed(0)
    want = model(x)
    after_model = np.random.get_state()[2]
    np.random.seed(0)
    torch.testing.assert_close(program(x), want)
    after_program = np.random.get_state()[2]
    np.random.seed(0)
    np.random.uniform(0, 1), np.random.uniform(0, 1)  # one draw a layer, as eager made
    assert after_program == after_model == np.random.get_state()[2]


class LayerDropWithABranch(LayerDrop):
    """The dead draw beside a break stitch rewrites: Dynamo breaks on numpy's generator, so
    while stitch traces the draw stands in as the number it drew (VITS 4.52)."""

    def forward(self, x):
        x = super().forward(x)
        if x.sum() > 0:
            x = x * 2
        return x


def test_a_dead_draw_beside_a_rewritten_branch():
    torch.manual_seed(0)
    x = torch.randn(2, 4)
    model = LayerDropWithABranch().eval()
    program = stitch.export(model, (x,), examples=[((-x,), {})])
    for inp in (x, -x):
        np.random.seed(3)
        want = model(inp)
        after_model = np.random.get_state()[2]
        np.random.seed(3)
        torch.testing.assert_close(program(inp), want)
        assert np.random.get_state()[2] == after_model


class SeedsThenDraws(torch.nn.Module):
    """``random.seed`` in the forward: the draw after it is the same on every call, and the
    generator ends where the seed and the draw leave it."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        random.seed(0)
        scale = random.random()
        h = self.lin(x) * scale
        if h.sum() > 0:
            h = h + 1
        return h


def test_a_seed_in_the_forward_is_replayed_with_the_draws():
    """The epilogue replays the seed before the draw (it replayed only the draw, so the
    caller's next ``random.random()`` differed from eager's)."""
    torch.manual_seed(0)
    model = SeedsThenDraws().eval()
    x, other = torch.randn(2, 4) + 1, -torch.ones(2, 4) * 5
    program = stitch.export(model, (x,), examples=[((other,), {})])
    after = []
    for call in (model, program):
        random.seed(42)
        with torch.no_grad():
            out = call(x)
        after.append((random.random(), out))
    assert after[0][0] == after[1][0]
    torch.testing.assert_close(after[1][1], after[0][1])
