"""Capture leaves the model, its classes, RNG streams and Dynamo exactly as they were."""

from __future__ import annotations

import logging

import pytest
import torch

from capture import InputError, explain
from capture.isolation import model_copy
from tests.zoo import make


class Counting(torch.nn.Module):
    """Mutates a buffer and a Python attribute in forward, and breaks."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.bn = torch.nn.BatchNorm1d(4)
        self.register_buffer("calls", torch.zeros(()))
        self.seen = []

    def forward(self, x):
        self.calls += 1
        self.seen.append(1)
        h = self.bn(self.lin(x))
        if h.sum() > 0:
            h = torch.dropout(h, 0.5, True)
        return h


def _snapshot(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_model_state_rng_and_dynamo_unchanged():
    model = Counting().train()
    before = _snapshot(model)
    forward = type(model).forward
    config = torch._dynamo.config.get_config_copy()
    x = torch.randn(3, 4)
    rng = torch.get_rng_state()
    census = explain(model, (x,))
    assert census.sites  # it did break
    after = _snapshot(model)
    assert before.keys() == after.keys()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert model.seen == [] and model.training
    assert type(model).forward is forward and "forward" not in vars(model)
    assert torch.equal(torch.get_rng_state(), rng)
    assert torch._dynamo.config.get_config_copy() == config


def test_model_exception_propagates_unchanged():
    class Fails(torch.nn.Module):
        def forward(self, x):
            raise KeyError("the model's own error")

    with pytest.raises(KeyError, match="the model's own error"):
        explain(Fails(), (torch.randn(2),))


@pytest.mark.parametrize("bad, message", [
    (lambda: (torch.nn.Linear, (torch.randn(2, 2),)), "instance"),
    (lambda: (42, (torch.randn(2),)), "nn.Module or a callable"),
    (lambda: (torch.nn.Linear(2, 2), (torch.randn(2, 2), torch.randn(2))), "do not fit"),
    (lambda: (torch.nn.Linear(2, 2), ([object()],)), "inputs must be tensors"),
    (lambda: (torch.nn.Linear(2, 2), "x"), "tuple of positional inputs"),
])
def test_bad_inputs_get_specific_errors(bad, message):
    model, args = bad()
    with pytest.raises(InputError, match=message):
        explain(model, args)


def test_bad_examples_get_specific_errors():
    model, args, kwargs, _ = make("print_stats")
    with pytest.raises(InputError, match=r"examples\[0\] must be an \(args, kwargs\) pair"):
        explain(model, args, kwargs, examples=[torch.randn(4, 16)])


def test_generator_forward_refused():
    class Gen(torch.nn.Module):
        def forward(self, x):
            yield x

    with pytest.raises(InputError, match="generator"):
        explain(Gen(), (torch.randn(2),))


def test_logging_levels_restored():
    level = logging.getLogger("torch._dynamo").level
    explain(*make("print_stats")[:3])
    assert logging.getLogger("torch._dynamo").level == level


class HookedOnItself(torch.nn.Module):
    """A hook closing over the model: the copy's hook wrote into the caller's model."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.last = None
        self.register_buffer("acc", torch.zeros(4))
        self.lin.register_forward_hook(lambda m, i, o: setattr(self, "last", o.detach()))
        self.lin.register_forward_pre_hook(lambda m, i: self.acc.add_(1.0) is None or None)

    def forward(self, x):
        return self.lin(x)


def test_a_copys_hooks_that_close_over_the_model_act_on_the_copy():
    model = HookedOnItself()
    copied = model_copy(model)
    copied(torch.randn(2, 4))
    assert model.last is None and torch.equal(model.acc, torch.zeros(4))
    assert copied.last is not None and torch.equal(copied.acc, torch.ones(4))


def test_an_expanded_example_is_put_back_without_writing_into_it():
    """An input whose elements share memory (``expand``: kornia's 3D soft-argmax takes one)
    cannot be written in place, by the forward or by the reset: it is left as it is, and
    the other inputs are put back."""
    from capture.inputs import Example
    from capture.isolation import examples_kept, reset_examples

    base = torch.randn(2, 1, 3)
    wide, plain = base.expand(2, 4, 3), torch.randn(3)
    given = plain.clone()
    with examples_kept([Example((wide, plain), {})]):
        plain.add_(1.0)  # a forward writing its input in place
        reset_examples()
    assert torch.equal(wide, base.expand(2, 4, 3)) and wide.stride()[1] == 0
    assert torch.equal(plain, given)
