"""Copies of the model share its parameters while an export runs; a write to one is put
back and the attempt runs again on copies of their own."""

import pytest
import torch

from capture.isolation import model_copy, restoring_state
from capture.shared_weights import shared_or_copied, shared_parameters


def _attempt(model, calls, write=None, fail=False):
    def attempt():
        copy = model_copy(model)
        calls.append(copy.weight is model.weight)
        if write is not None:
            write(copy)
        if fail:
            raise ValueError("the attempt's own failure")
        return copy
    return attempt


def test_copies_share_the_parameters_and_nothing_runs_twice():
    model, calls = torch.nn.Linear(3, 3), []
    out = shared_or_copied(model, _attempt(model, calls))
    assert calls == [True] and out.weight is model.weight
    assert shared_parameters() == {}  # only while the attempt runs


def test_an_in_place_write_is_put_back_and_the_attempt_runs_again_on_own_copies():
    model, calls = torch.nn.Linear(3, 3), []
    before = model.weight.detach().clone()

    def write(copy):
        with torch.no_grad():
            copy.weight.mul_(2)
    out = shared_or_copied(model, _attempt(model, calls, write))
    assert calls == [True, False]  # the second attempt's copy has its own weights
    assert torch.equal(model.weight, before)
    assert out.weight is not model.weight


def test_a_write_through_a_view_and_a_swap_of_data_are_seen():
    for write in (lambda c: c.weight.data[0].fill_(7.0),
                  lambda c: setattr(c.weight, "data", torch.zeros(2, 2))):
        model, calls = torch.nn.Linear(3, 3), []
        weight, before = model.weight, model.weight.detach().clone()
        shared_or_copied(model, _attempt(model, calls, write))
        assert calls == [True, False]
        assert model.weight is weight and torch.equal(model.weight, before)


def test_a_failed_attempt_that_wrote_runs_again_and_one_that_did_not_raises():
    model, calls = torch.nn.Linear(3, 3), []
    with pytest.raises(ValueError, match="own failure"):
        shared_or_copied(model, _attempt(model, calls, fail=True))
    assert calls == [True]
    calls.clear()
    with pytest.raises(ValueError):  # the second attempt fails alike
        shared_or_copied(model, _attempt(
            model, calls, lambda c: c.weight.data.add_(1), fail=True))
    assert calls == [True, False]


def test_restoring_state_puts_back_a_write_no_version_counter_shows():
    # batch norm's kernel updates its running stats without moving their version counter
    model = torch.nn.BatchNorm1d(3).train()
    mean = model.running_mean
    with restoring_state(model), torch.no_grad():
        model(torch.randn(4, 3))
    assert model.running_mean is mean and torch.equal(mean, torch.zeros(3))


class _Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.tensor(0.5))  # a 0-d parameter: a scale

    def forward(self, x):
        return x * self.weight


def test_a_0d_parameter_is_compared_and_put_back():
    model, calls = _Scaled(), []
    shared_or_copied(model, _attempt(model, calls))
    assert calls == [True]
    calls.clear()
    shared_or_copied(model, _attempt(model, calls, lambda c: c.weight.data.add_(1)))
    assert calls == [True, False] and model.weight.item() == 0.5


def test_a_model_with_a_0d_parameter_exports():
    import stitch

    model, x = _Scaled(), torch.randn(2, 3)
    program = stitch.export(model, (x,))
    assert torch.equal(program(x), model(x))
