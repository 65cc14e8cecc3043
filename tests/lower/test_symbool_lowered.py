"""A graph whose cond returns a boolean that is read (``.item()``) and picks the next cond —
transformers' mask-skip decision in AIMv2's and VITS's stitched graphs — failed every
Inductor and AOTInductor build on torch 2.14.1 (``TypeError: unsupported operand type(s) for
-: 'Equality' and 'Equality'`` in Inductor's post-grad fake-tensor update). While stitch
lowers, symbolic booleans are compared by structure there (capture/symbool_same.py)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import stitch
from stitch.lower.backends import build


class DecisionPicksBranch(nn.Module):
    def forward(self, x, mask):
        full = torch.cond(mask.sum() == mask.numel(), lambda m: m.all(), lambda m: m.any(),
                          (mask,))
        take = torch.full((), full.item(), dtype=torch.bool)  # a SymBool, then a predicate
        return torch.cond(take, lambda x: x + 1, lambda x: x - 1, (x,))


def _inputs():
    x = torch.randn(4)
    return [(x, torch.ones(16, dtype=torch.long)), (x, torch.zeros(16, dtype=torch.long)),
            (-x, torch.arange(16) % 2)]


@pytest.fixture(scope="module")
def program():
    (x, mask), *others = _inputs()
    return stitch.export(DecisionPicksBranch(), (x, mask),
                         examples=[(args, {}) for args in others])


def test_the_premise_torch_alone_fails_to_lower_the_graph():
    """If this fails, torch lowers such graphs itself and symbool_same can go."""
    x, mask = _inputs()[0]
    exported = torch.export.export(DecisionPicksBranch(), (x, mask))
    assert any(isinstance(n.meta.get("val"), torch.SymBool)
               for n in exported.graph_module.graph.nodes)
    with pytest.raises(Exception, match="'Equality' and 'Equality'"):
        torch.compile(exported.module(), fullgraph=True, dynamic=False)(x, mask)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["inductor", "aoti"])
def test_the_graph_lowers_and_takes_every_side(program, backend):
    x, mask = _inputs()[0]

    class Example:
        args, kwargs = (x, mask), {}

    built = build(backend, program, Example)
    for args in _inputs():
        got = torch.utils._pytree.tree_leaves(built.run(*args))
        torch.testing.assert_close(got, [DecisionPicksBranch()(*args)])
