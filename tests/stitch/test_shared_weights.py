"""An export shares the model's parameters with its copies and its program, and leaves
them as they were even where the forward writes them."""

import pytest
import torch

import stitch
from stitch.errors import StitchError


class Branchy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        if x.sum() > 0:
            return self.lin(x)
        return -x


class HalvesItsWeight(torch.nn.Module):
    def __init__(self, through_data: bool):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.through_data = through_data

    def forward(self, x):
        if self.through_data:  # no version counter moves
            self.lin.weight.data.mul_(0.5)
        else:
            with torch.no_grad():
                self.lin.weight.mul_(0.5)
        return self.lin(x)


def test_the_program_holds_the_models_own_parameters():
    model = Branchy()
    program = stitch.export(model, (torch.randn(2, 4),))
    held = program.exported_program.state_dict["model.lin.weight"]
    assert held is model.lin.weight
    assert dict(program._module.named_parameters())["model.lin.weight"] is model.lin.weight
    x = torch.randn(2, 4).abs()
    torch.testing.assert_close(program(x), model(x))


@pytest.mark.parametrize("through_data", [True, False])
def test_a_forward_that_writes_its_parameters_leaves_the_models_as_they_were(through_data):
    model = HalvesItsWeight(through_data)
    weight, before = model.lin.weight, model.lin.weight.detach().clone()
    try:
        program = stitch.export(model, (torch.randn(2, 4),))
    except StitchError:
        program = None
    assert model.lin.weight is weight and torch.equal(weight, before)
    if program is not None:  # its own weights: each call halves them, as the model's do
        held = program.exported_program.state_dict["model.lin.weight"]
        assert held is not weight
