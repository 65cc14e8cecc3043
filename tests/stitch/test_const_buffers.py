"""Integer buffers the forward only reads are constants while exporting as written
(``stitch/const_buffers.py``): EnCodec's padding, computed from 0-d int64 buffers and the
static input length, would otherwise be data to torch.export (an unbacked size, a guard at
``if length <= max_pad``) and the model refused."""

import pytest
import torch
from torch import nn

import stitch
from stitch.const_buffers import constant_buffers, fold_constant_buffers


class ReflectPad(nn.Module):
    """EnCodec's padding for a strided conv, its sizes kept as 0-d int64 buffers."""

    def __init__(self, kernel: int = 7, stride: int = 2):
        super().__init__()
        self.conv = nn.Conv1d(1, 1, kernel, stride)
        self.stride = nn.Buffer(torch.tensor(stride), persistent=False)
        self.kernel_size = nn.Buffer(torch.tensor(kernel), persistent=False)
        self.padding_total = nn.Buffer(torch.tensor(kernel - stride), persistent=False)

    def forward(self, x):
        length = x.shape[-1]
        n_frames = (length - self.kernel_size + self.padding_total) / self.stride + 1
        n_frames = torch.ceil(n_frames).to(torch.int64) - 1
        extra = n_frames * self.stride + self.kernel_size - self.padding_total - length
        right = self.padding_total // 2
        left = self.padding_total - right
        max_pad = max(left, right + extra)
        if length <= max_pad:
            x = nn.functional.pad(x, (0, max_pad - length + 1))
        x = nn.functional.pad(x, (left, right + extra), "reflect")
        return self.conv(x)


class CountsCalls(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = nn.Buffer(torch.tensor(0), persistent=False)
        self.scale = nn.Buffer(torch.tensor(3), persistent=True)

    def forward(self, x):
        self.calls += 1
        return x * self.scale


def test_padding_from_int_buffers_exports_as_one_graph():
    torch.manual_seed(0)
    model = ReflectPad().eval()
    with pytest.raises(Exception, match="data-dependent"):
        torch.export.export(model, (torch.randn(1, 1, 40),))  # the premise
    program = stitch.export(model, (torch.randn(1, 1, 40),))
    assert program.report.breaks_after == 0
    assert any("read as constants" in n and "padding_total" in n for n in program.report.notes)
    x = torch.randn(1, 1, 40)
    torch.testing.assert_close(program(x), model(x))
    assert type(model) is ReflectPad and "stride" in model._buffers  # the model untouched


def test_written_or_persistent_buffers_are_not_folded():
    model = CountsCalls()
    assert constant_buffers(model) == []  # `calls` is written, `scale` is persistent


class Bumps(nn.Module):
    """Writes its child's buffer from another class: the scan of the child's class misses it,
    the assignment then fails the export instead of leaving a stale constant."""

    def __init__(self):
        super().__init__()
        self.inner = ReflectPad()

    def forward(self, x):
        self.inner.stride = self.inner.stride + 0
        return self.inner(x)


def test_an_assignment_from_another_class_is_refused_not_folded():
    work = Bumps()
    assert fold_constant_buffers(work) == ["inner.stride", "inner.kernel_size",
                                           "inner.padding_total"]
    with pytest.raises(AttributeError, match="read as a constant"):
        work(torch.randn(1, 1, 40))
