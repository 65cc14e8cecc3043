"""A loop over ``range(n)``, ``n`` a size known only at run time with a static bound, whose
body writes its results by index and reads Python numbers from tensors (torchvision's Keypoint
R-CNN ``heatmaps_to_keypoints``: a bicubic resize per box to a size read from the box):
torch.export cannot make ``range`` of such a size, and torch 2.14's while_loop body cannot hold
the numbers it reads. stitch unrolls it to the bound, each iteration a torch.cond on
``i < n`` (``synthesize/convert/bounded_loop.py``)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import stitch
from stitch.synthesize.convert.branch_inplace import keeps_shape
from stitch.synthesize.operators.rt_inplace import write_into
from stitch.synthesize.operators.rt_unroll import unroll_count


class PeakPerBox(nn.Module):
    """Per kept box (at most 4): its heatmaps resized to the box's size, each peak's place."""

    def __init__(self, separate: bool = False) -> None:
        super().__init__()
        self.separate = separate

    def forward(self, maps, boxes, scores):
        keep = scores > 0.5
        if self.separate:  # each tensor masked on its own: two sizes from data
            maps, boxes = maps[keep][:4], boxes[keep][:4]
        else:
            idx = keep.nonzero()[:, 0][:4]
            maps, boxes = maps[idx], boxes[idx]
        widths = (boxes[:, 2] - boxes[:, 0]).clamp(min=1).ceil()
        heights = (boxes[:, 3] - boxes[:, 1]).clamp(min=1).ceil()
        peaks = torch.zeros((len(boxes), maps.shape[1]))
        for i in range(len(boxes)):
            w = int(widths[i].item())
            h = int(heights[i].item())
            roi = F.interpolate(maps[i][:, None], size=(h, w), mode="bicubic",
                                align_corners=False)[:, 0]
            pos = roi.reshape(roi.shape[0], -1).argmax(dim=1)
            peaks[i] = (pos % roi.shape[2]).float() / w + (pos // roi.shape[2]).float()
        return peaks


def _inputs(seed: int, n: int = 6, kept: float | None = None):
    g = torch.Generator().manual_seed(seed)
    boxes = torch.rand(n, 4, generator=g) * 6
    boxes[:, 2:] += boxes[:, :2] + 1
    scores = torch.rand(n, generator=g) if kept is None else torch.full((n,), kept)
    return torch.randn(n, 3, 5, 5, generator=g), boxes, scores


@pytest.mark.parametrize("separate", [False, True])
def test_loop_over_a_size_from_data_is_one_graph(separate):
    model = PeakPerBox(separate)
    with pytest.raises(Exception, match="data-dependent"):  # the premise
        torch.export.export(model, _inputs(0), strict=False)
    program = stitch.export(model, _inputs(0), examples=[(_inputs(1), {})])
    assert program.report.graphs_after == 1, str(program.report)
    assert any("unrolled" in d.reason for d in program.report.decisions)
    conds = [n for n in program.exported_program.graph.nodes if "cond" in str(n.target)]
    assert len(conds) == 4  # the bound: at most 4 boxes
    for args in (_inputs(2), _inputs(3), _inputs(4, kept=0.0), _inputs(5, kept=1.0)):
        torch.testing.assert_close(program(*args), model(*args), rtol=0, atol=0)


def _peak(heat, w: int, h: int):
    roi = F.interpolate(heat[:, None], size=(h, w), mode="bilinear", align_corners=False)[:, 0]
    pos = roi.reshape(roi.shape[0], -1).argmax(dim=1)
    return (pos % roi.shape[2]).float() / w


class PeakPerBoxSized(nn.Module):
    """Written otherwise: the count as ``size(0)`` bound to a name first, the body through a
    helper function, the result stored with ``index_copy_``."""

    def forward(self, maps, boxes, scores):
        idx = (scores > 0.5).nonzero()[:, 0][:3]
        maps, boxes = maps[idx], boxes[idx]
        sizes = (boxes[:, 2:] - boxes[:, :2]).clamp(min=1).ceil()
        out = maps.new_zeros(boxes.size(0), maps.shape[1])
        count = boxes.size(0)
        for k in range(count):
            peak = _peak(maps[k], int(sizes[k, 0].item()), int(sizes[k, 1].item()))
            out.index_copy_(0, torch.tensor([k]), peak[None])
        return out


def test_the_loop_written_otherwise_is_one_graph():
    model = PeakPerBoxSized()
    program = stitch.export(model, _inputs(0), examples=[(_inputs(1), {})])
    assert program.report.graphs_after == 1, str(program.report)
    assert any("unrolled" in d.reason for d in program.report.decisions), str(program.report)
    for args in (_inputs(2), _inputs(4, kept=0.0), _inputs(5, kept=1.0)):
        torch.testing.assert_close(program(*args), model(*args), rtol=0, atol=0)


class TooMany(nn.Module):
    """Rows picked by a mask of 200: a bound over the 32 iterations stitch unrolls, so the
    loop becomes a while_loop (test_indexed_loop.py); its body tests a read in Python."""

    def forward(self, x):
        rows = x[x[:, 0] > 0]
        out = torch.zeros(len(rows))
        for i in range(len(rows)):
            out[i] = rows[i, 1] * int(rows[i, 2].item() > 0)
        return out


def test_a_python_test_on_data_in_the_while_loop_body_is_refused_naming_its_line():
    """``int(v.item() > 0)``: a Python bool from data, which no while_loop body can hold
    (before indexed_loop: refused at the loop, its bound over the limit)."""
    import inspect

    x = torch.randn(200, 3)
    lines, first = inspect.getsourcelines(TooMany.forward)
    line = first + next(k for k, text in enumerate(lines) if "int(rows[i, 2]" in text)
    with pytest.raises(stitch.StitchError, match=rf"test_bounded_loop.py:{line} \[scalar_read\]"):
        stitch.export(TooMany(), (x,))


def test_a_body_rebinding_its_loop_variable_is_left_as_written():
    import ast

    from stitch.synthesize.analysis.context import RewriteRefused
    from stitch.synthesize.convert.bounded_loop import unroll_bounded

    func = ast.parse("def f(x):\n    for i in range(len(x)):\n        i = i + 1\n").body[0]
    with pytest.raises(RewriteRefused, match="rebinds the loop variable"):
        unroll_bounded(func.body[0], func, None)


def test_the_helpers_keep_python_values():
    assert unroll_count(5) == 5 and list(range(unroll_count(0))) == []
    a = torch.zeros(2, 3)
    assert write_into(a, torch.ones(2, 3), True) is a and a.sum() == 6
    b = torch.zeros(2, 3)
    with pytest.raises(RuntimeError):  # stated sizes must hold
        write_into(b, torch.ones(3, 3), True)
    assert write_into(b, torch.ones(3, 3)) is not b  # a rebinding: the new tensor
    import ast
    assert keeps_shape([ast.parse("x[0] = 1\nx.add_(1)").body])
    assert not keeps_shape([ast.parse("x.squeeze_(0)").body])


class CountsThenScales(torch.nn.Module):
    def forward(self, x, n):
        i = 0
        for i in range(int(n.item())):  # noqa: B007 - read after the loop
            x = x + 1
        return x * i


def test_the_loop_variable_read_after_a_counted_loop_is_refused_by_name():
    """A while_loop carries only what was bound before it: ``i`` kept its value from before
    the loop (0 where the model gives n - 1, and n=0 and n=1 both give 0)."""
    with pytest.raises(stitch.StitchError, match="i bound in the loop is read after it"):
        stitch.export(CountsThenScales(), (torch.ones(2), torch.tensor(1)),
                      examples=[((torch.zeros(2), torch.tensor(0)), {})])


class ChecksInTheLoop(torch.nn.Module):
    def forward(self, x):
        while x.sum() < 10:
            assert x.min() >= 0, "neg in loop"
            x = x + 1
        return x


def test_an_assert_in_a_while_loop_on_data_raises_assertion_error():
    """The body became the while_loop's function, which the assert rewrite skipped: Dynamo's
    own check raised a bare RuntimeError where the model raises AssertionError."""
    t = torch.tensor
    model = ChecksInTheLoop()
    program = stitch.export(model, (t([1.0, 2.0]),), examples=[((t([3.0, 2.0]),), {})])
    torch.testing.assert_close(program(t([0.0, 1.0])), model(t([0.0, 1.0])))
    with pytest.raises(AssertionError, match="neg in loop"):
        program(t([-1.0, 2.0]))
