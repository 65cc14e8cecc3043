"""A loop over ``range(n)``, ``n`` a size known only at run time whose static bound is over
the iterations stitch unrolls (torchvision's Keypoint R-CNN: one per detection, up to 100),
becomes one ``torch.while_loop`` where its body uses the loop variable only as the first
index of its subscripts (``synthesize/convert/indexed_loop.py``): reads by ``index_select``, writes
by ``index_copy`` of the row, numbers read inside the body kept as numbers."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from test_bounded_loop import _inputs as boxes_and_maps
from torch import nn

import stitch
from stitch.synthesize.operators.rt_unroll import put, take, while_count


class PeaksOfAllBoxes(nn.Module):
    """Per kept box (all of them: a bound of 40), its heatmaps resized to the box's size,
    each peak's place; the result written by index, one row and a column slice."""

    def forward(self, maps, boxes, scores):
        idx = (scores > 0.5).nonzero()[:, 0]
        maps, boxes = maps[idx], boxes[idx]
        widths = (boxes[:, 2] - boxes[:, 0]).clamp(min=1).ceil()
        heights = (boxes[:, 3] - boxes[:, 1]).clamp(min=1).ceil()
        peaks = torch.zeros((len(boxes), 2, maps.shape[1]))
        for i in range(len(boxes)):
            w = int(widths[i].item())
            h = int(heights[i].item())
            roi = F.interpolate(maps[i][:, None], size=(h, w), mode="bicubic",
                                align_corners=False)[:, 0]
            pos = roi.reshape(roi.shape[0], -1).argmax(dim=1)
            peaks[i, 0, :] = (pos % roi.shape[2]).float() / w + boxes[i, 0]
            peaks[i, 1] = (pos // roi.shape[2]).float() / h
        return peaks


def _inputs(seed: int, kept: float | None = None):
    return boxes_and_maps(seed, n=40, kept=kept)  # 40 boxes: over the unroll limit


@pytest.fixture(scope="module")
def peaks_program():
    model = PeaksOfAllBoxes()
    return model, stitch.export(model, _inputs(0), examples=[(_inputs(1), {})])


def test_a_loop_over_the_unroll_limit_is_one_while_loop(peaks_program):
    model, program = peaks_program
    with pytest.raises(Exception, match="data-dependent"):  # the premise
        torch.export.export(model, _inputs(0), strict=False)
    assert program.report.graphs_after == 1, str(program.report)
    loops = [n for n in program.exported_program.graph.nodes
             if n.op == "call_function" and "while_loop" in str(n.target)]
    assert len(loops) == 1
    reasons = [d.reason for d in program.report.decisions]
    assert any("torch.while_loop carrying peaks" in r for r in reasons), reasons
    assert not any("not rewritten" in r for r in reasons), reasons  # no stale refusal
    for args in (_inputs(2), _inputs(3), _inputs(4, kept=0.0), _inputs(5, kept=1.0)):
        torch.testing.assert_close(program(*args), model(*args), rtol=0, atol=0)


class UsesTheIndexAsANumber(nn.Module):
    def forward(self, x):
        rows = x[x[:, 0] > 0]
        out = torch.zeros(len(rows))
        for i in range(len(rows)):
            w = int(rows[i, 2].abs().ceil().item())
            out[i] = rows[i, 1] * torch.ones(w).sum() * i  # i as a number: not an index
        return out


class WritesThroughARow(nn.Module):
    def forward(self, x):
        rows = x[x[:, 0] > 0]
        out = torch.zeros(len(rows), 2)
        for i in range(len(rows)):
            w = int(rows[i, 2].abs().ceil().item())
            out[i][0] = torch.ones(w).sum()  # a write into out[i]: a copy as a while_loop
        return out


class ReadsAnAliasOfWhatItWrites(nn.Module):
    def forward(self, x):
        rows = x[x[:, 0] > 0]
        out = torch.zeros(len(rows), 2)
        first = out[:, 0]  # a view: in eager each write shows through it at once
        for i in range(len(rows)):
            w = int(rows[i, 2].abs().ceil().item())
            out[i, 0] = torch.ones(w).sum() + first.sum()
        return out


@pytest.mark.parametrize("model_type, why", [
    (ReadsAnAliasOfWhatItWrites, "'first' shares memory with out"),
    (UsesTheIndexAsANumber, "the loop variable used other than as an index"),
    (WritesThroughARow, "a write into a row read by the loop index"),
])
def test_a_body_the_while_loop_cannot_hold_is_refused_naming_why(model_type, why):
    x = torch.randn(200, 3)
    with pytest.raises(stitch.StitchError) as caught:
        stitch.export(model_type(), (x,))
    message = str(caught.value)
    assert "a bound of 200, over the 32" in message and why in message, message
    assert "test_indexed_loop.py:" in message and "from user code" not in message


def test_the_helpers_keep_python_values():
    x = torch.arange(12.0).reshape(4, 3)
    assert take(x, 2) is not None and torch.equal(take(x, 2), x[2])
    assert take([5, 6], 1) == 6
    assert put(x, 1, (slice(None, 2),), -1.0) is x and x[1].tolist() == [-1.0, -1.0, 5.0]
    assert while_count("S1", 3, lambda i, acc: (acc + [i],), ([],)) == ([0, 1, 2],)


def test_the_traced_helpers_read_and_write_the_same_elements():
    """With the while_loop's 0-d counter: a copy of the row, and a new tensor holding the
    write (the loop carries it)."""
    x = torch.arange(12.0).reshape(4, 3)
    i = torch.tensor(2)
    assert torch.equal(take(x, i), x[2])
    y = put(x, i, (0,), 9.0)
    assert y is not x and y[2, 0] == 9 and x[2, 0] == 6
    assert torch.equal(y[[0, 1, 3]], x[[0, 1, 3]])
    with pytest.raises(TypeError, match="only tensors can be"):
        take([1, 2], i)
    with pytest.raises(TypeError, match="found list, expected a tensor"):
        put([1, 2], i, (), 3)


class NumbersFromEachClass(nn.Module):
    """A loop over a tensor's rows (``tensor_loop``) reading each row as a Python number:
    as a size, as a count of an inner loop."""

    def forward(self, x, labels):
        out = torch.zeros(x.shape[0])
        for c in torch.unique(labels):
            k = int(c.item())
            out = out + torch.ones(k + 1).sum() * (labels == c).float()
            for _ in range(int(c)):
                out = out * 0.5
        return out


def test_numbers_read_from_a_row_stay_in_the_while_loop_body():
    def inputs(seed: int):
        g = torch.Generator().manual_seed(seed)
        return torch.randn(12, 4, generator=g), torch.randint(0, 5, (12,), generator=g)

    model = NumbersFromEachClass()
    program = stitch.export(model, inputs(0), examples=[(inputs(1), {})])
    assert program.report.graphs_after == 1, str(program.report)
    for seed in range(2, 6):
        torch.testing.assert_close(program(*inputs(seed)), model(*inputs(seed)), rtol=0, atol=0)


def _scaled_peaks(heat, sizes):
    """The loop in a helper, its count a name bound from ``size(0)``, its result another name."""
    count = sizes.size(0)
    result = heat.new_zeros(count, heat.shape[1])
    for k in range(count):
        w = int(sizes[k, 0].item())
        roi = F.interpolate(heat[k][:, None], size=(w, w), mode="bilinear",
                            align_corners=False)[:, 0]
        result[k] = roi.reshape(roi.shape[0], -1).amax(dim=1) * w
    return result


class PeaksThroughAHelper(nn.Module):
    def forward(self, maps, boxes, scores):
        idx = (scores > 0.5).nonzero()[:, 0]
        sizes = (boxes[idx][:, 2:] - boxes[idx][:, :2]).clamp(min=1).ceil()
        return _scaled_peaks(maps[idx], sizes)


def test_the_loop_in_a_helper_written_otherwise_is_one_while_loop():
    model = PeaksThroughAHelper()
    program = stitch.export(model, _inputs(0), examples=[(_inputs(1), {})])
    assert program.report.graphs_after == 1, str(program.report)
    assert any("torch.while_loop carrying result" in d.reason
               for d in program.report.decisions), str(program.report)
    for args in (_inputs(2), _inputs(4, kept=0.0), _inputs(5, kept=1.0)):
        torch.testing.assert_close(program(*args), model(*args), rtol=0, atol=0)
