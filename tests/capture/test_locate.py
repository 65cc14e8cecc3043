"""Refusals name the line that changes the state: in the class of the module that changes
it, not another class of the file that sets an attribute of the same name (a peer fixture's
refusal pointed at another model's forward)."""

import inspect

import torch

from capture.side_state import find_mutations


class Decoy(torch.nn.Module):
    def reset(self):
        self.total = 0.0  # another class's attribute of the same name, earlier in the file


class Tracks(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.total = 0.0

    def forward(self, x):
        self.total = self.total * 0.5 + float(x.sum())  # the line a refusal must name
        return x * 2


def test_a_mutation_is_located_in_its_own_class():
    model, x = Tracks(), torch.randn(3)

    def run(after_each=None):
        model(x)
        if after_each is not None:
            after_each()

    found = {m.name: m for m in find_mutations(model, run)}
    source, start = inspect.getsourcelines(Tracks.forward)
    line = start + next(i for i, text in enumerate(source) if "the line a refusal" in text)
    assert found["total"].location.endswith(f"test_locate.py:{line}"), found["total"].location
