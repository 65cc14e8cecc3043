"""Where torch.compile fails in the census's compiled run, the census is taken once more
with Dynamo's automatic dynamic shapes off (capture/explain.py): Dynamo's bookkeeping of
the sizes a frame has seen fails on its own on some models (torch 2.14, torch_geometric's
GraphUNet: ``IndexError`` in ``pgo.is_stride_dynamic``), and a frame compiled for the sizes
it is given finds the same breaks."""

from __future__ import annotations

import sys

import pytest
import torch

from capture import CaptureError
from capture.explain import explain

explain_module = sys.modules["capture.explain"]  # ``capture.explain`` is the function


class Prints(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        print("halfway")  # one break
        return y + 1


def _failing_with_automatic_dynamic(monkeypatch):
    """``_run_compiled`` as Dynamo's bookkeeping failure makes it: it fails while automatic
    dynamic shapes are on."""
    original = explain_module._run_compiled
    calls = []

    def run(work, inputs):
        calls.append(torch._dynamo.config.automatic_dynamic_shapes)
        if torch._dynamo.config.automatic_dynamic_shapes:
            raise CaptureError("torch.compile failed on example 0 although the model runs "
                               "eagerly: IndexError: tuple index out of range")
        return original(work, inputs)

    monkeypatch.setattr(explain_module, "_run_compiled", run)
    return calls


def test_the_census_is_taken_again_with_static_recompiles(monkeypatch):
    calls = _failing_with_automatic_dynamic(monkeypatch)
    census = explain(Prints(), (torch.ones(3),), examples=[((torch.ones(5),), {})])
    assert calls == [True, False]
    assert len(census.sites) == 1 and census.sites[0].source_line.startswith("print(")
    assert torch._dynamo.config.automatic_dynamic_shapes  # the config as it was


def test_where_the_second_census_fails_too_the_first_error_stands(monkeypatch):
    def run(work, inputs):
        raise CaptureError(f"failed with automatic_dynamic_shapes="
                           f"{torch._dynamo.config.automatic_dynamic_shapes}")

    monkeypatch.setattr(explain_module, "_run_compiled", run)
    with pytest.raises(CaptureError, match="automatic_dynamic_shapes=True"):
        explain(Prints(), (torch.ones(3),))
