"""cond -> where predication (stitch.lower.predicate): what makes a graph capturable in a CUDA
graph. Tested on the CPU: the predicated graph must compute what the cond graph computes on
both sides of every branch, and impure arms must keep their cond, with the reason."""

from __future__ import annotations

import copy

import pytest
import torch
from check_models import CheckInBranch

import stitch
from stitch.lower.predicate import predicate_conds
from tests.zoo import make


def _conds(module) -> int:
    return sum(1 for gm in module.modules() if isinstance(gm, torch.fx.GraphModule)
               for n in gm.graph.nodes if n.target is torch.ops.higher_order.cond)


@pytest.mark.parametrize("case", ["branch_on_tensor", "nested_encoder", "early_return",
                                  "print_in_branch"])
def test_pure_conds_become_where_and_compute_the_same_on_both_sides(case):
    model, args, kwargs, examples = make(case)
    program = stitch.export(model, args, kwargs, examples=examples)
    reference = program.exported_program.module()
    before = _conds(reference)
    predicated, replaced, kept = predicate_conds(reference)
    assert before >= 1 and replaced == before and kept == []
    assert _conds(predicated) == 0 and _conds(reference) == before  # a copy; original kept
    reference_run = copy.deepcopy(reference)
    x = args[0]  # the examples, then inputs scaled both ways to drive each side
    inputs = [(args, kwargs), *examples] + [((x * s, *args[1:]), kwargs)
                                            for s in (1.0, -1.0, 10.0, -10.0)]
    for a, k in inputs:
        torch.testing.assert_close(predicated(*a, **k), reference_run(*a, **k))


def _exported(arm_true, arm_false):
    class M(torch.nn.Module):
        def forward(self, x, i):
            return torch.cond(x.sum() > 0, arm_true, arm_false, (x, i))

    x, i = torch.randn(4, 8), torch.tensor([1, 2])
    return torch.export.export(M(), (x, i)).module()


@pytest.mark.parametrize("arm, why", [
    (lambda x, i: (x + torch.rand_like(x),), "random"),
    (lambda x, i: (x.index_select(0, i).sum(0, keepdim=True).expand(4, 8) + x,), "index"),
])
def test_impure_arms_keep_their_cond_with_the_reason(arm, why):
    module = _exported(arm, lambda x, i: (x - 1,))
    predicated, replaced, kept = predicate_conds(module)
    assert replaced == 0 and len(kept) == 1 and why in kept[0]
    assert _conds(predicated) == 1


def test_a_check_inside_an_arm_keeps_the_cond():
    torch.manual_seed(0)
    x = torch.randn(2, 8)
    program = stitch.export(CheckInBranch().eval(), (x.abs() * 0 + 1,),
                            examples=[((-x.abs() - 1,), {})])
    _, replaced, kept = predicate_conds(program.exported_program.module())
    assert replaced == 0 and "checks" in kept[0]
