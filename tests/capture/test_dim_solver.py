"""torch.export's advice on dynamic dimensions, skipped where sympy cannot solve a size guard
and every dynamic dimension is ``Dim.AUTO`` (capture/dim_solver.py): a YOLOv9-style concat
of an ``AConv`` path with a plain one exports, and its program accepts exactly the image
sizes the model does."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.export import Dim

import stitch
from capture.dim_solver import dim_advice_optional, only_auto


class AConv(nn.Module):
    """ultralytics' AConv: a 2x2 average pool of stride 1, then a stride-2 convolution."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.cv = nn.Conv2d(channels, channels, 3, 2, 1)

    def forward(self, x):
        return self.cv(F.avg_pool2d(x, 2, 1, 0, False, True))


class Neck(nn.Module):
    """Two AConv downsamplings, the second upsampled and concatenated with the first (and
    again after a third): the image sizes the concats fit are guarded."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, 2, 1)
        self.a1, self.a2, self.a3 = AConv(4), AConv(4), AConv(8)

    def forward(self, x):
        p = self.a1(self.stem(x))
        q = self.a2(p)
        y = torch.cat([F.interpolate(q, scale_factor=2.0, mode="nearest"), p], 1)
        return torch.cat([self.a3(y), q], 1)


_AUTO = ({0: Dim.AUTO, 2: Dim.AUTO, 3: Dim.AUTO},)


def test_torch_export_fails_in_its_solver():
    """Why the fix exists; if this fails, torch solves the guard (or no longer asks)."""
    with pytest.raises(NotImplementedError, match="solve_univariate_inequality"):
        torch.export.export(Neck(), (torch.randn(2, 3, 64, 64),), dynamic_shapes=_AUTO,
                            strict=False)


def test_with_auto_dimensions_the_export_finishes_and_keeps_its_guards():
    model = Neck().eval()
    with dim_advice_optional(_AUTO):
        ep = torch.export.export(model, (torch.randn(2, 3, 64, 64),), dynamic_shapes=_AUTO,
                                 strict=False)
    with pytest.raises(AssertionError, match="Guard failed"):  # 68 does not fit the concat
        ep.module()(torch.randn(1, 3, 68, 68))
    x = torch.randn(1, 3, 72, 80)
    torch.testing.assert_close(ep.module()(x), model(x), rtol=0, atol=0)


def test_stitch_serves_exactly_the_sizes_the_model_takes():
    model = Neck().eval()
    inputs = [torch.randn(2, 3, 64, 64), torch.randn(1, 3, 96, 96), torch.randn(2, 3, 80, 72)]
    program = stitch.export(model, (inputs[0],), examples=[((x,), {}) for x in inputs[1:]])
    for size in range(60, 100, 2):
        x = torch.randn(1, 3, size, size)
        try:
            want = model(x)
        except RuntimeError:
            with pytest.raises(AssertionError, match="Guard failed"):
                program(x)
            continue
        torch.testing.assert_close(program(x), want, rtol=0, atol=0)


def test_a_dimension_the_user_named_keeps_torchs_behaviour():
    assert only_auto(_AUTO) and only_auto([{0: Dim.AUTO, 1: None}, {"k": 3}])
    assert not only_auto(({0: Dim("batch")},))
    assert not only_auto(({0: Dim.DYNAMIC},))
    assert not only_auto(({0: None},)) and not only_auto(None)


def test_torchs_solver_is_put_back():
    from torch.fx.experimental.symbolic_shapes import DimConstraints

    before = DimConstraints.solve
    with dim_advice_optional(_AUTO), dim_advice_optional(_AUTO):
        assert DimConstraints.solve is not before
    assert DimConstraints.solve is before
