"""A function under ``torch.compiler.disable`` (transformers 4.52's Llama4 mask builder) is
traced as written while stitch exports: the decorator changes nothing it computes."""

from __future__ import annotations

import torch
from torch import nn

import stitch
from stitch.plain_export import FIRST
from stitch.plan import Action


@torch.compiler.disable(recursive=False)
def scaled(h, x):
    if x.sum() > 0:  # its own break: rewritten like any other once traced
        return h * 2
    return h - 1


class DisabledMethod(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    @torch.compiler.disable
    def mask(self, x):
        return (x > 0).float()

    def forward(self, x):
        return self.lin(x) * self.mask(x)


class DisabledFunction(DisabledMethod):
    def forward(self, x):
        return scaled(self.lin(x), x)


def _graph_targets(program) -> list[str]:
    return [str(n.target) for n in program.exported_program.graph_module.graph.nodes
            if n.op == "call_function"]


class DisabledMethodLogged(DisabledMethod):
    def forward(self, x):
        h = self.lin(x) * self.mask(x)
        print("masked", h.shape[-1])  # an effect: the census runs
        return h


def test_a_disabled_method_is_traced_as_written(capsys):
    torch.manual_seed(0)
    x = torch.randn(2, 4)
    for model in (DisabledMethod(), DisabledMethodLogged()):
        wrapper = vars(DisabledMethod)["mask"]
        program = stitch.export(model, (x,), examples=[((-x,), {})])
        if isinstance(model, DisabledMethodLogged):  # the census saw the disabled call
            assert any(d.action == Action.UNDISABLED for d in program.report.decisions)
        else:  # torch.export took it before any census: nothing to undo
            assert FIRST in program.report.notes
        assert vars(DisabledMethod)["mask"] is wrapper  # the user's class keeps its decorator
        torch.testing.assert_close(program(x * 3), model(x * 3))


def test_a_disabled_function_with_a_branch_becomes_a_cond():
    torch.manual_seed(0)
    model, x = DisabledFunction(), torch.randn(2, 4).abs()
    program = stitch.export(model, (x,), examples=[((-x,), {})])
    assert any("cond" in t for t in _graph_targets(program))
    for inp in (x, -x):  # both sides
        torch.testing.assert_close(program(inp), model(inp))
