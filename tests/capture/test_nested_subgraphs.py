"""A cond nested in a cond's arm, then a ``torch.no_grad()`` region: torch.export's
grad-mode pass deleted the nested arms (``AttributeError: '<lambda>' object has no
attribute 'true_graph_0'``). While stitch traces they are kept (capture/nested_subgraphs.py).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import stitch
from capture.nested_subgraphs import nested_subgraphs_kept
from capture.tracing_fixes import tracing_fixes


class NestedCondsThenNoGrad(nn.Module):
    """torch.cond in a torch.cond's arm, in a loop, with a no_grad region after it."""

    def forward(self, x, flags):
        out = torch.zeros_like(x)
        for i in range(2):
            def outer(out, x):
                return torch.cond(x.sum() > 0, lambda o, v: (o + v,), lambda o, v: (o - v,),
                                  (out, x))

            out, = torch.cond(flags[i], outer, lambda o, v: (o.clone(),), (out, x))
        with torch.no_grad():
            scale = out.abs().amax()
        return out * scale


_X = torch.tensor([1.0, -2.0, 3.0])
_FLAGS = torch.tensor([True, False])


def test_plain_torch_export_loses_the_nested_arms():
    """The torch bug the fix is for; if this fails, torch fixed it and the fix can go."""
    with pytest.raises(AttributeError, match="true_graph_0"):
        torch.export.export(NestedCondsThenNoGrad(), (_X, _FLAGS), strict=False)


def test_nested_arms_are_kept_while_stitch_traces_and_the_patch_is_undone():
    original = torch.fx.GraphModule.delete_all_unused_submodules
    model = NestedCondsThenNoGrad()
    with tracing_fixes(), nested_subgraphs_kept():  # re-entrant
        ep = torch.export.export(model, (_X, _FLAGS), strict=False)
    assert torch.fx.GraphModule.delete_all_unused_submodules is original
    nested = [name for name, _ in ep.graph_module.named_modules() if name.count(".") == 1]
    assert nested, "the outer arms' own subgraphs are in the program"
    for x in (_X, -_X):
        for flags in ([True, False], [False, True], [True, True], [False, False]):
            flags = torch.tensor(flags)
            torch.testing.assert_close(ep.module()(x, flags), model(x, flags))


class NestedIfsThenNoGrad(nn.Module):
    """The same written as a user writes it: data-dependent ``if``s, one inside the other,
    then a no_grad region (a rotary embedding's ``@torch.no_grad()`` does this)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0:
            h = self.lin(h)
            if h.max() > 1:
                h = self.lin(h) * 2
            else:
                h = h + 1
        with torch.no_grad():
            scale = h.abs().amax() + 1
        return h / scale


def test_nested_data_dependent_ifs_before_a_no_grad_region_are_one_graph():
    torch.manual_seed(0)
    model = NestedIfsThenNoGrad()
    inputs = [torch.randn(3, 4) * scale for scale in (0.1, 1, 3, 10) for _ in range(20)]
    with torch.no_grad():
        sides = [(bool(model.lin(x).sum() > 0), bool(model.lin(model.lin(x)).max() > 1))
                 for x in inputs]
    chosen = [inputs[sides.index(k)] for k in ((True, True), (True, False), (False, False))]
    program = stitch.export(model, (chosen[0],), examples=[((x,), {}) for x in chosen[1:]])
    assert program.report.graphs_after == 1
    for x in inputs:
        torch.testing.assert_close(program(x), model(x))


class ThreeLevelsFromHelpers(nn.Module):
    """Written another way: arms made by helper functions, a cond three deep."""

    def forward(self, x):
        def inner(v):
            return torch.cond(v.mean() > 0, lambda t: t * 2, lambda t: t / 2, (v,))

        def middle(v):
            return torch.cond(v.max() > 1, inner, lambda t: t - 1, (v,))

        y = torch.cond(x.sum() > 0, middle, lambda t: t + 1, (x,))
        with torch.no_grad():
            scale = y.abs().amax()
        return y * scale


class CondInALoopBody(nn.Module):
    """Another container: the cond sits in a while_loop's body, not in a cond's arm."""

    def forward(self, x):
        def body(i, v):
            return i + 1, torch.cond(v.sum() > 0, lambda t: t * 0.5, lambda t: t + 1, (v,))

        _, y = torch._higher_order_ops.while_loop(lambda i, v: i < 3, body,
                                                  (torch.tensor(0), x))
        with torch.no_grad():
            scale = y.abs().amax()
        return y * scale


@pytest.mark.parametrize("model", [ThreeLevelsFromHelpers(), CondInALoopBody()],
                         ids=["three-levels", "in-a-loop-body"])
def test_other_nestings_are_kept_too(model):
    x = torch.tensor([1.5, -2.0, 3.0, 0.25])
    with pytest.raises(AttributeError, match="true_graph_0"):  # plain torch.export
        torch.export.export(model, (x,), strict=False)
    with tracing_fixes():
        ep = torch.export.export(model, (x,), strict=False)
    for inp in (x, -x, x * 3, -x / 4):
        torch.testing.assert_close(ep.module()(inp), model(inp))
