"""A forced side the model runs where the program's arm asserts what its test implies: the
forced model meets a state no input gives it, so that side is compared with stitch's
rewrite forced instead, and the report says so; any other difference still refuses."""

from __future__ import annotations

import pytest
import torch

from capture.inputs import Example
from stitch.errors import VerificationError
from stitch.findings import graph_notes
from stitch.settings import Settings
from stitch.verify.verifier import verify

ASSERTED = "Runtime assertion failed for expression Ne(u2, 0) on node 'sym_not_1'"


def _fn(result=None, error=None, against="model"):
    def run(x):
        if error is not None:
            raise error
        return x * 2 if result is None else result

    run.against = against
    return run


def _forced(fallback):
    eager = _fn()
    eager.fallback = fallback
    graph = _fn(error=RuntimeError(ASSERTED))
    return [("S2", True, eager, graph)]


def _verify(forced):
    x = torch.ones(3)
    return verify(lambda v: v * 2, lambda v: v * 2, dict, [Example((x,), {})], Settings(),
                  forced)


def test_an_arms_own_assertion_falls_back_to_the_rewrite_and_is_named():
    forced = _forced(_fn(error=RuntimeError("shapes"), against="rewrite"))
    checks = _verify(forced)
    assert [c.what for c in checks] == ["example 0", "S2 forced true"]
    eager = forced[0][2]
    assert eager.against == "rewrite" and "Ne(u2, 0)" in eager.why
    note = graph_notes(forced, 0, [])[-1]
    assert note.startswith("checked against stitch's rewrite only") and "Ne(u2, 0)" in note


def test_the_fallback_still_refuses_a_program_that_differs_from_the_rewrite():
    with pytest.raises(VerificationError, match="S2 forced true: the model returned"):
        _verify(_forced(_fn(against="rewrite")))


def test_without_a_fallback_the_assertion_refuses():
    forced = _forced(None)
    with pytest.raises(VerificationError, match="S2 forced true"):
        _verify(forced)
