"""A cond whose arms give outputs of different sizes gets new sizes from torch.cond, which
rebuilds the output's strides from them; torch can only where each arm's strides are
products of its sizes (operators/rt_select.py). A window model that pads to whole windows,
reshapes, and cuts the padding off under the same test meets this on its cut: one arm
returns the padded tensor, laid out by its reshapes, the other the cut copy."""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F
from torch import nn

import stitch
from stitch.synthesize.operators.rt_select import unmerged_strides


class ChannelsLastWindows(nn.Module):
    """Swin's and TinyViT's layout (batch, height, width, channels) on 4x4 windows."""

    def forward(self, x):
        b, h, w, c = x.shape
        pad_b, pad_r = (4 - h % 4) % 4, (4 - w % 4) % 4
        padding = pad_b > 0 or pad_r > 0
        if padding:
            x = F.pad(x, (0, 0, 0, pad_r, 0, pad_b))
        ph, pw = h + pad_b, w + pad_r
        x = x.view(b, ph // 4, 4, pw // 4, 4, c).transpose(2, 3).reshape(-1, 16, c)
        x = self.mix(x)
        x = x.view(b, ph // 4, pw // 4, 4, 4, c).transpose(2, 3).reshape(b, ph, pw, c)
        if padding:
            x = x[:, :h, :w].contiguous()
        return x

    def mix(self, windows):
        return windows.softmax(1)


def test_both_sides_of_the_cut_are_served():
    model = ChannelsLastWindows()
    examples = [torch.randn(2, 8, 8, 4), torch.randn(2, 10, 10, 4)]
    program = stitch.export(model, (examples[0],), examples=[((examples[1],), {})])
    for h, w in ((8, 8), (9, 13), (12, 16), (13, 8), (6, 7)):
        x = torch.randn(2, h, w, 4)
        torch.testing.assert_close(program(x), model(x), rtol=0, atol=0)


class ProjectedWindows(ChannelsLastWindows):
    """The same with a linear layer over each window's tokens, as in attention: recording
    the layout of the cut in the arm's graph would guard that nothing was padded
    (capture/contiguity.py)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def mix(self, windows):
        return self.proj(windows)


def test_a_projected_window_with_one_batch_size():
    model = ProjectedWindows().eval()
    examples = [torch.randn(2, 8, 8, 8), torch.randn(2, 10, 10, 8)]
    program = stitch.export(model, (examples[0],), examples=[((examples[1],), {})])
    for h, w in ((8, 8), (9, 13), (12, 16), (13, 8)):
        x = torch.randn(2, h, w, 8)
        torch.testing.assert_close(program(x), model(x))


def _raised_in(filename: str, function: str, error: BaseException) -> BaseException:
    """``error`` as raised by a function ``function`` of a file ``filename``."""
    namespace: dict = {}
    exec(compile(f"def {function}(e):\n    raise e\n", filename, "exec"), namespace)
    try:
        namespace[function](error)
    except BaseException as e:  # noqa: BLE001 - returned for the test to read
        return e
    raise AssertionError("unreachable")


def test_the_stride_merge_is_known_by_where_it_failed_not_by_its_text():
    cond_py = os.path.join(os.path.dirname(torch.__file__), "_higher_order_ops", "cond.py")
    for kind in (KeyError, RuntimeError):  # torch raises either, by what it meets
        assert unmerged_strides(_raised_in(cond_py, "_bound_stride", kind("32*Max(1, w)")))
        assert not unmerged_strides(_raised_in(cond_py, "_merge_output", kind("x")))
        assert not unmerged_strides(_raised_in("model.py", "_bound_stride", kind("x")))
    try:  # raised from it, under another error (Dynamo wraps what it meets)
        try:
            raise _raised_in(cond_py, "_bound_stride", KeyError("s"))
        except KeyError as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as e:
        assert unmerged_strides(e)


class WindowOrPadded(ChannelsLastWindows):
    """TinyViT's block: the whole input is one window where it is exactly the window's size,
    else the padded windows above; the padding tests sit in the arm of the outer size test."""

    def forward(self, x):
        if x.shape[1] == 4 and x.shape[2] == 4:
            return x.softmax(-1)
        return super().forward(x)


def test_padded_windows_in_the_arm_of_another_size_test():
    model = WindowOrPadded()
    examples = [torch.randn(2, 8, 8, 4), torch.randn(2, 10, 10, 4)]
    program = stitch.export(model, (examples[0],), examples=[((examples[1],), {})])
    for h, w in ((8, 8), (9, 13), (12, 16), (13, 8), (5, 6)):
        x = torch.randn(2, h, w, 4)
        torch.testing.assert_close(program(x), model(x), rtol=0, atol=0)
