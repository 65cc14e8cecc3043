"""``stitch.compile(..., candidates=...)`` narrows what ``auto`` builds, and says what is wrong
with a list it cannot use."""

from __future__ import annotations

import pytest
import torch

import stitch
from stitch.deploy import compile as compile_stage


class _Program:  # what compile reads before it builds: examples only
    examples = ()


def test_candidates_narrow_auto_in_the_machines_order(monkeypatch):
    seen = []

    def fake_select(program, backends, examples, **kw):
        seen.append(backends)
        return None, None
    monkeypatch.setattr(compile_stage, "select", fake_select)
    monkeypatch.setattr(compile_stage, "CompiledProgram", lambda *a: a)
    stitch.compile(_Program(), "auto", candidates=["onnxruntime", "inductor"])
    stitch.compile(_Program(), "auto")
    every = (compile_stage.AUTO_BACKENDS_GPU if torch.cuda.is_available()
             else compile_stage.AUTO_BACKENDS_CPU)
    assert seen == [["inductor", "onnxruntime"], every]


@pytest.mark.parametrize("backend, candidates, message", [
    ("auto", ["inductr"], "'inductr'] not among this machine's automatic candidates"),
    ("auto", [], "none not among"),
    ("aoti", ["aoti"], "candidates only narrow backend='auto'"),
])
def test_unusable_candidates_are_refused_with_the_fix(backend, candidates, message):
    with pytest.raises(stitch.StitchError, match=message.replace("[", r"\[").replace("(", r"\(")):
        stitch.compile(_Program(), backend, candidates=candidates)


class Noisy(torch.nn.Module):
    """Draws noise in forward (as VITS's stochastic durations do), behind a break."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x) + 0.1 * torch.randn_like(x)
        if h.sum() > 0:
            h = h * 2
        return h


def test_candidates_of_a_noisy_program_are_compared_from_the_same_random_state():
    """Each candidate runs the examples from the random state the reference ran from: the
    eager graph is not 'wrong' against itself (it was, and auto then failed with
    KeyError: 'eager' on VITS in the bench)."""
    torch.manual_seed(0)
    x = torch.randn(2, 4)
    program = stitch.export(Noisy(), (x,), examples=[((-x,), {})])
    compiled = stitch.compile(program, "auto", candidates=["inductor"], repeats=2)
    reasons = {c.name: c.reason for c in compiled.decision.candidates}
    assert "wrong" not in reasons.get("eager", ""), reasons
    assert compiled.decision.chosen in reasons


def test_a_graph_deploys_over_the_model_only_where_it_is_clearly_faster():
    """Microsecond ops time within each other's noise: a graph whose runs are not mostly
    under the model's median is not deployed over the model (in the bench such picks run
    1.06-1.19x eager)."""
    from stitch.deploy.profile import clearly_faster

    model = [1.00, 1.01, 0.99, 1.02, 1.00, 0.98, 1.03, 1.00]
    assert not clearly_faster([0.97, 1.05, 0.96, 1.04, 0.98, 1.02, 0.99, 1.03], model)
    assert not clearly_faster(model, model)  # a tie is the model's
    assert clearly_faster([0.5, 0.52, 0.49, 0.51, 0.6, 0.5], model)
    assert clearly_faster([0.5], model) and not clearly_faster([1.0], [1.0])


class Scaled(torch.nn.Module):
    def forward(self, x, n: int, bias=None):
        y = x * n
        return y if bias is None else y + bias


def _slow_eager(backend, program, example):
    from stitch.lower.backends import Built

    module = program.exported_program.module()

    def run(*a, **k):
        for _ in range(30):
            out = module(*a, **k)
        return out
    return Built(backend, run, 0.0)


def test_the_model_deployed_is_called_on_the_inputs_as_given(monkeypatch):
    """Where the model itself deploys, a call is the model's call: no conversion of the
    numbers the graph takes as tensors, no check of the Nones the graph holds (each costs
    microseconds a call: 1.2-1.3x eager on pyg's aggregations)."""
    from stitch.deploy import compiled as deployed
    from stitch.deploy.profile import select

    model = Scaled()
    program = stitch.export(model, (torch.randn(2, 3), 2),
                            examples=[((torch.randn(2, 3), 3), {})])
    built, decision = select(program, [], program.examples, repeats=3,
                             builders={"eager": _slow_eager})
    assert decision.chosen == "model"
    compiled = deployed.CompiledProgram(program, built, decision)

    def converted(*a, **k):
        raise AssertionError("the model's call converted its inputs")
    monkeypatch.setattr(deployed, "graph_inputs", converted)
    x, bias = torch.randn(2, 3), torch.randn(3)
    torch.testing.assert_close(compiled(x, 4), model(x, 4))
    torch.testing.assert_close(compiled(x, 5, bias=bias), model(x, 5, bias=bias))
