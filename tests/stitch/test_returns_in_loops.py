"""``return`` inside a loop over layers (early-exit models): a ``break``, the loop's flag
and a return after it; one graph, exact at every exit, the exit index included."""

from __future__ import annotations

import torch

import stitch


class Doubling(torch.nn.Module):
    def forward(self, h):
        return h * 2.0


class ExitsEarly(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(Doubling() for _ in range(4))
        self.head = torch.nn.Linear(4, 2)

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            logits = self.head(x)
            if x.abs().mean() > 1.0:  # confident enough: leave the stack
                return logits, i
        return logits, len(self.layers)


def test_an_early_return_over_layers_is_one_graph_exact_at_every_exit():
    torch.manual_seed(0)
    model = ExitsEarly()
    base = torch.ones(2, 4)
    program = stitch.export(model, (base * 0.3,),  # exits at layer 1
                            examples=[((base * 0.01,), {}), ((base * 2,), {})])  # none; 0
    assert program.report.graph_ops.get("cond", 0) >= 1, str(program.report)
    exits = set()
    for scale in (0.001, 0.01, 0.07, 0.1, 0.2, 0.3, 0.4, 0.6, 1.0, 3.0):
        x = base * scale
        got, want = program(x), model(x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1] and isinstance(got[1], int), (scale, got[1], want[1])
        exits.add(want[1])
    assert exits == {0, 1, 2, 3, 4}, exits
