"""A ``with`` block inside a data-dependent branch (synthesize/convert/branch_to_cond.py): the arm
holds it when nothing returns from inside it, and the trace decides whether its context
manager can be in a cond. transformers 5's ``sdpa_mask`` has one on a path a Python flag
never takes (its vmap mask builder); its early return, lifted, puts it in an arm."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import stitch
from stitch.errors import GuardsRefusedError

ENTERED: list[int] = []  # Recorded's effect


class Recorded:
    """A context manager with a Python effect: no cond arm can hold it."""

    def __enter__(self):
        ENTERED.append(1)

    def __exit__(self, *exc):
        return False


class NoGradInArm(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            with torch.no_grad():
                y = x * 2
        else:
            y = x - 1
        return y + 1


class FlagPathInArm(nn.Module):
    """The ``with`` sits on a path a Python flag decides; only the flag's path is traced."""

    def __init__(self, recorded: bool) -> None:
        super().__init__()
        self.recorded = recorded

    def forward(self, x):
        if x.sum() > 0:
            if self.recorded:
                with Recorded():
                    y = x * 3
            else:
                y = x * 2
        else:
            y = x - 1
        return y


class ReturnInWith(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            with torch.no_grad():
                return x * 2
        return x - 1


def _sides():
    x = torch.rand(4) + 0.1
    return x, -x


@pytest.mark.parametrize("model", [NoGradInArm(), FlagPathInArm(recorded=False)],
                         ids=["no_grad", "untaken_path"])
def test_a_with_block_in_an_arm_is_one_graph(model):
    pos, neg = _sides()
    with pytest.raises(Exception, match="data-dependent"):  # the premise
        torch.export.export(model, (pos,), strict=False)
    program = stitch.export(model, (pos,), examples=[((neg,), {})])
    assert program.report.graphs_after == 1, str(program.report)
    conds = [n for n in program.exported_program.graph.nodes if "cond" in str(n.target)]
    assert len(conds) == 1
    for x in (pos, neg, torch.zeros(4)):
        torch.testing.assert_close(program(x), model(x), rtol=0, atol=0)


def test_a_context_manager_no_cond_can_hold_is_refused_not_dropped():
    """Traced, the arm's ``with Recorded()`` is a Python effect: the cond fails to trace and
    the branch is refused with why, not rewritten without the context."""
    pos, neg = _sides()
    with pytest.raises(GuardsRefusedError, match="failed to trace .*side effect"):
        stitch.export(FlagPathInArm(recorded=True), (pos,), examples=[((neg,), {})])


def test_a_return_inside_a_with_is_refused_with_its_line():
    pos, neg = _sides()
    with pytest.raises(GuardsRefusedError, match=r"returns from inside a `with` block"):
        stitch.export(ReturnInWith(), (pos,), examples=[((neg,), {})])
