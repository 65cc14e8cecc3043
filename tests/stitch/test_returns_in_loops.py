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



class ConfidentExit(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(3))
        self.head = torch.nn.Linear(4, 2)

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x).tanh()
            logits = self.head(x)
            if logits.softmax(-1).max() > 0.62:
                return logits, i
        return logits, len(self.layers)


def test_sides_no_example_takes_are_verified_against_the_rewrite():
    """Where the examples leave sides untaken, the loop's guards are forced there; the flag
    the return after the loop reads is one no forcing of the model's test sets, so they are
    checked against stitch's rewrite (a branch stitch built), not refused as a mismatch."""
    torch.manual_seed(0)
    model = ConfidentExit()
    program = stitch.export(model, (torch.randn(2, 4),),
                            examples=[((torch.randn(3, 4) * 4,), {})])
    assert program.report.graphs_after == 1
    exits = set()
    for k in range(12):
        x = torch.randn(k % 3 + 2, 4) * (k / 2)  # the report: batch 1 is refused here
        got, want = program(x), model(x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1], (k, got[1], want[1])
        exits.add(want[1])
    assert len(exits) > 1, exits
