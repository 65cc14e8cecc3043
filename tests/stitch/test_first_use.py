"""Models that set themselves up on their first call (RWKV rescales its weights in place and
sets a flag; RecurrentGemma makes its recurrent state from None): built fresh, stitch
refuses them, and the refusal says it is first-use set-up and how to export."""

import pytest
import torch

import stitch
from capture.inputs import Example
from stitch.first_use import first_use_changes


class RescalesOnFirstCall(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.rescaled = False

    def forward(self, x):
        if not self.rescaled:  # in place, once: as RWKV's _rescale_layers in eval
            with torch.no_grad():
                self.lin.weight.div_(2)
            self.rescaled = True
        return self.lin(x)


class CountsCalls(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x * 2


def test_a_fresh_model_that_sets_up_on_first_use_is_refused_saying_how_to_export():
    model = RescalesOnFirstCall().eval()
    weight = model.lin.weight.detach().clone()
    x = torch.randn(2, 4)
    with pytest.raises(stitch.StitchError) as refused:
        stitch.export(model, (x,), examples=[((torch.randn(3, 4),), {})])
    text = str(refused.value)
    assert "a first call changed 'lin.weight', 'rescaled'" in text, text
    assert "call it once before stitch.export" in text
    assert model.rescaled is False and torch.equal(model.lin.weight, weight)  # untouched
    with torch.no_grad():
        model(x)  # what the refusal says to do
    program = stitch.export(model, (x,), examples=[((torch.randn(3, 4),), {})])
    for a in (x, torch.randn(5, 4)):
        torch.testing.assert_close(program(a), model(a))


class KeepsLastSum(torch.nn.Module):
    def forward(self, x):
        setattr(self, "last", float(x.sum()))  # noqa: B010 - set by name on every call
        return x * 2


def test_state_changed_on_every_call_or_never_is_not_first_use():
    x = [Example((torch.randn(2, 4),), {})]
    assert first_use_changes(RescalesOnFirstCall(), x) == ["lin.weight", "rescaled"]
    assert first_use_changes(CountsCalls(), x) == []  # the second call changes it too
    assert first_use_changes(torch.nn.Linear(4, 4), x) == []  # nothing changes
    # a second call on the same input sets the same value; one on another input does not
    assert first_use_changes(KeepsLastSum(), x) == []
    assert first_use_changes(KeepsLastSum(), x + [Example((torch.ones(2, 4),), {})]) == []


def test_a_value_set_from_the_input_on_every_call_is_not_called_set_up():
    with pytest.raises(stitch.StitchError) as refused:
        stitch.export(KeepsLastSum(), (torch.randn(2, 4),))
    assert "first use" not in str(refused.value), str(refused.value)
