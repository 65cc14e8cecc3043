"""torch.cond's check for arms that write their operands, made by Dynamo alone while stitch
traces (capture/cond_schema.py): torch's autograd entry no longer traces both arms again
for it on every call, and an arm that writes an operand is still refused."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch._higher_order_ops.cond import CondOp, cond_op

from capture.cond_schema import cond_schema_checked_once
from capture.tracing_fixes import tracing_fixes


class Gated(nn.Module):
    """A cond whose arms read a parameter (an operand that requires grad)."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(2.0))

    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda v: v * self.scale, lambda v: v - self.scale,
                          (x,))


class WritesOperand(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(2.0))

    def forward(self, x):
        def write(v):
            v.add_(1.0)
            return v * self.scale

        return torch.cond(x.sum() > 0, write, lambda v: v * self.scale, (x.clone(),))


@pytest.fixture
def schemas(monkeypatch):
    """How many times torch built a cond's schema (each build traces both arms)."""
    made = []
    original = CondOp.gen_schema

    def counted(self, *args, **kwargs):
        made.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(CondOp, "gen_schema", counted)
    return made


_X = torch.tensor([1.0, -2.0, 3.0])


def test_torch_alone_builds_the_schema_on_every_call(schemas):
    """Why the fix exists; if this fails, torch no longer traces the arms for it."""
    torch.export.export(Gated(), (_X,), strict=False)
    assert len(schemas) >= 1


def test_while_stitch_traces_no_schema_is_built(schemas):
    with tracing_fixes():
        ep = torch.export.export(Gated(), (_X,), strict=False)
    assert schemas == []
    for x in (_X, -_X):  # the same program: both arms kept
        torch.testing.assert_close(ep.module()(x), Gated()(x))


def test_an_arm_writing_its_operand_is_still_refused():
    with cond_schema_checked_once(), pytest.raises(Exception, match="(?i)mutat"):
        torch.export.export(WritesOperand(), (_X,), strict=False)


def test_the_flag_is_put_back():
    before = cond_op._supports_training_input_mutation
    with cond_schema_checked_once(), cond_schema_checked_once():
        assert cond_op._supports_training_input_mutation is True
    assert cond_op._supports_training_input_mutation is before
