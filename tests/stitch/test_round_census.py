"""A rewrite round's census is a torch.compile of the rewritten model on every example, the
largest part of an export's time; none is taken that cannot tell anything new."""

from __future__ import annotations

import pytest
import torch

from capture import CaptureError
from stitch.synthesize.convert import rounds

HOP = ("torch.compile failed on example 0 although the model runs eagerly: "
       "UncapturedHigherOrderOpError: This higher order operator doesn't work unless it is "
       "captured completely with torch.compile. Got graph break/error: Unsupported "
       "Tensor.item() call with capture_scalar_outputs=False")


class Example:
    args, kwargs = (), {}


class Census:
    sites = ()


def _failing_on(example: int):
    error = CaptureError(HOP.replace("example 0", f"example {example}"))
    error.example = example
    return error


@pytest.fixture
def calls(monkeypatch):
    """The census's compiles, each with its capture flags; it fails on an arm's scalar
    read while scalars are not captured, as Dynamo does."""
    made = []

    def explain(work, args, kwargs, examples=()):
        scalars = torch._dynamo.config.capture_scalar_outputs
        made.append((len(examples) + 1, scalars))
        if not scalars:
            raise _failing_on(0)
        return Census()

    monkeypatch.setattr(rounds, "explain", explain)
    return made


def test_a_census_that_fails_on_example_0_is_not_taken_again_on_it_alone(calls):
    with pytest.raises(CaptureError):
        rounds._census(None, [Example(), Example()])
    assert calls == [(2, False)]


def test_a_census_failing_on_a_later_example_is_taken_on_example_0(monkeypatch):
    made = []

    def explain(work, args, kwargs, examples=()):
        made.append(len(examples) + 1)
        if examples:
            raise _failing_on(1)
        return Census()

    monkeypatch.setattr(rounds, "explain", explain)
    assert isinstance(rounds._census(None, [Example(), Example()]), Census)
    assert made == [2, 1]


def test_an_arm_asking_for_capture_is_censused_once_more_with_it(calls):
    census, needed = rounds._round_census(None, [Example(), Example()])
    assert isinstance(census, Census) and needed
    assert calls == [(2, False), (2, True)]  # no census without capture in between


def test_a_later_round_starts_with_capture_on(calls):
    census, needed = rounds._round_census(None, [Example(), Example()], scalars=True)
    assert isinstance(census, Census) and not needed
    assert calls == [(2, True)]
