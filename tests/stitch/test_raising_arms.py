"""A branch one side of which raises wherever it is taken is a check and the other side,
whatever the spelling of the raise: a helper's ``if not ok: if raises: raise E(msg,
key=...)`` with its message built over several lines from sizes (kornia's
``KORNIA_CHECK_SAME_SIZE``), on a test of sizes or of data (operators/rt_raising.py)."""

from __future__ import annotations

import pytest
import torch

import stitch


class ShapeMismatch(ValueError):
    def __init__(self, message, *, actual=None, expected=None):
        super().__init__(message)
        self.actual, self.expected = actual, expected


def same_size(x, y, dim=0, allow_one=False, raises=True, msg=None):
    xs, ys = x.shape, y.shape
    if not (xs[dim] == ys[dim] or (allow_one and xs[dim] == 1)):
        if raises:
            expected = f"{ys[dim]} or 1" if allow_one and ys[dim] != 1 else f"{ys[dim]}"
            error = f"size mismatch at dimension {dim}: expected {expected}, got {xs[dim]}.\n"
            error += f"  shapes {list(xs)} and {list(ys)}"
            if msg is not None:
                error += f"\n  {msg}"
            raise ShapeMismatch(error, actual=list(xs), expected=list(ys))
        return False
    return True


class Scaled(torch.nn.Module):
    """A per-image scale of batch 1 or the images' batch, checked by a size helper."""

    def forward(self, images, scale):
        same_size(scale, images, allow_one=True, msg="scale: a batch of 1 or the images'")
        return images * scale.abs().mean()


def _example(batch, scales, side=8):
    return torch.randn(batch, 3, side, side), torch.randn(scales)


def test_a_size_check_whose_raising_side_is_a_helpers_nested_raise_is_one_graph():
    torch.manual_seed(0)
    model = Scaled()
    program = stitch.export(model, _example(1, 1), examples=[(_example(2, 2), {}),
                                                               (_example(3, 1, 6), {})])
    assert program.report.graphs_after == 1
    for batch, scales, side in ((1, 1, 8), (4, 4, 8), (5, 1, 10), (2, 2, 5)):
        args = _example(batch, scales, side)
        torch.testing.assert_close(program(*args), model(*args))
    bad = _example(3, 2)
    with pytest.raises(ShapeMismatch) as eager:
        model(*bad)
    with pytest.raises(ShapeMismatch) as exported:
        program(*bad)
    # the message's constant text is the model's; sizes known only at run time are named
    assert "size mismatch at dimension 0" in str(exported.value)
    assert "scale: a batch of 1 or the images'" in str(exported.value)
    assert "size mismatch at dimension 0" in str(eager.value)


def _finite(x, raises=True):
    if torch.isnan(x).any():
        if raises:
            message = "the input holds NaN"
            message += f" (a tensor of {x.dim()} dimensions)"
            raise FloatingPointError(message)
        return torch.nan_to_num(x)
    return x


class Checked(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(_finite(x)).relu()


def test_a_data_test_whose_raising_side_is_nested_under_a_flag_is_one_graph():
    torch.manual_seed(0)
    model = Checked().eval()
    program = stitch.export(model, (torch.randn(3, 4),), examples=[((torch.randn(5, 4),), {})])
    assert program.report.graphs_after == 1
    x = torch.randn(6, 4)
    torch.testing.assert_close(program(x), model(x))
    x[2, 1] = float("nan")
    with pytest.raises(FloatingPointError, match="the input holds NaN \\(a tensor of 2"):
        program(x)
