"""Each verification starts from the program as exported: the tensors an earlier run wrote
(a buffer the graph updates, through a view too) are put back in place, the module is the
same one (no copy of its graph); a size probe verified after the examples starts from the
exported buffers, as the model's fresh copy does."""

from __future__ import annotations

import torch

import stitch
from stitch.verify.program_start import ProgramStart


class Counts(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("seen", torch.zeros(2))
        self.scale = torch.nn.Parameter(torch.ones(2))

    def forward(self, x):
        self.seen[0:1].add_(x.shape[0])  # in place, through a view
        return x * self.scale + self.seen


def test_a_written_buffer_is_put_back_and_the_module_is_the_same():
    ep = torch.export.export(Counts(), (torch.ones(3, 2),))
    module = ep.module()
    start = ProgramStart(module)
    with torch.no_grad():
        module(torch.ones(3, 2))
        module(torch.ones(3, 2))
    assert module.seen.tolist() == [6.0, 0.0]
    assert start.fresh() is module
    assert module.seen.tolist() == [0.0, 0.0]
    assert start.fresh()(torch.ones(3, 2)).tolist() == [[4.0, 1.0]] * 3


def test_a_tensor_written_outside_a_run_is_put_back_too():
    module = Counts()
    start = ProgramStart(module)
    with torch.no_grad():
        module.scale.mul_(3)
    start.put_back()
    assert module.scale.tolist() == [1.0, 1.0]


def test_a_counting_model_verifies_on_every_example_and_probe_from_the_start():
    model = Counts()
    program = stitch.export(model, (torch.ones(3, 2),), examples=[((torch.ones(4, 2),), {})])
    assert any("cut to" in c.what for c in program.report.checks)
    buffers = {k.rsplit(".", 1)[-1]: v for k, v in program._module.named_buffers()}
    assert buffers["seen"].tolist() == [0.0, 0.0]  # as exported, after verification
    assert torch.equal(program(torch.ones(5, 2)), model(torch.ones(5, 2)))

