"""A build that computes otherwise is never deployed. LongCat-Flash's experts (transformers
5.23.0: a loop over ``nonzero()`` with a ``continue``, a cond per expert holding another)
export exactly, but Inductor's build of the graph is wrong on torch 2.14.1 (Dynamo's and
AOTAutograd's are right: a fault in Inductor's lowering, docs/backends.md#known-limits).
Selection refuses it for wrong results and deploys a correct variant."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

import stitch

pytestmark = pytest.mark.slow


def test_a_wrong_inductor_build_is_refused_and_a_correct_variant_deployed():
    longcat = pytest.importorskip("transformers.models.longcat_flash.modeling_longcat_flash")
    config = SimpleNamespace(expert_ffn_hidden_size=8, hidden_size=16, n_routed_experts=4,
                             zero_expert_num=2, hidden_act="silu")
    torch.manual_seed(0)
    experts = longcat.LongcatFlashExperts(config)
    torch.nn.init.normal_(experts.gate_up_proj)
    torch.nn.init.normal_(experts.down_proj)
    hidden, weights = torch.randn(5, 16), torch.rand(5, 2)
    chosen = torch.tensor([[0, 4], [1, 0], [5, 1], [0, 1], [4, 5]])  # 4, 5: identity experts
    other = ((torch.randn(5, 16), torch.tensor([[2, 3]] * 5), weights), {})
    program = stitch.export(experts, (hidden, chosen, weights), examples=[other])
    compiled = stitch.compile(program, "auto", candidates=["inductor"], repeats=3)
    inductor = next(c for c in compiled.decision.candidates if c.backend == "inductor")
    assert inductor.correct or ("wrong" in inductor.reason and not inductor.chosen), inductor
    with torch.no_grad():
        for args, kwargs in [((hidden, chosen, weights), {}), other]:
            torch.testing.assert_close(compiled(*args, **kwargs), experts(*args, **kwargs))
