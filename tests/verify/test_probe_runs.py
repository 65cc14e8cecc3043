"""A size probe's verification is its acceptance test: the model runs once on each probe
(where it raises, the probe owes nothing and the program does not run on it), not once to
see whether it accepts the size and again to compare."""

from __future__ import annotations

import torch

import stitch


class Doubles(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] == 1:
            raise ValueError("one row")  # the model refuses this size itself
        return x * 2


def _rows_seen(model: torch.nn.Module) -> list[int]:
    """The row counts of the real (not traced) inputs the model's copies run on: a hook
    outside the state stitch compares (deep copies keep the function)."""
    rows: list[int] = []

    def hook(_module, args):
        if type(args[0]) is torch.Tensor:
            rows.append(args[0].shape[0])

    model.register_forward_pre_hook(hook)
    return rows


def test_each_probe_runs_the_model_once_and_a_refused_one_owes_nothing():
    model = Doubles()
    rows = _rows_seen(model)
    program = stitch.export(model, (torch.ones(3, 2),), examples=[((torch.ones(4, 2),), {})])
    probed = [c.what for c in program.report.checks if "cut to" in c.what]
    assert probed == ["example 0 cut to x.shape[0] == 0", "example 1 cut to x.shape[0] == 0"]
    assert rows.count(0) == 2  # one run per probe the model accepts: its verification
    assert rows.count(1) == 2  # one per probe it refuses
