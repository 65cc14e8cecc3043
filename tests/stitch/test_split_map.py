"""A tensor split by sizes read from data (``sizes.tolist()``), each segment mapped, the
results concatenated (packed variable-length attention: one segment per image or frame of a
grid given as data, transformers' Qwen-style vision towers) becomes one ``torch.while_loop``
over the segments (``synthesize/convert/split_map.py``, ``rt_segments.py``): a program for every
grid of the inputs' shapes, not only the examples'."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import stitch
from stitch.plan import Action
from stitch.synthesize.operators.rt_segments import split_map_cat


def _attend(q, k, v, causal=False):
    # transformers' sdpa wrapper: a Python test on the segment's size, data-dependent here
    is_causal = q.shape[2] > 1 and causal
    return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal).transpose(1, 2)


class PackedAttention(nn.Module):
    """Images of a grid given as data, packed into one sequence; attention within each frame."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(16, 48)

    def forward(self, x, grid):
        positions = []
        for t, h, w in grid.tolist():  # a loop over the images: Python while tracing
            positions.append(torch.arange(h * w).repeat(t))
        x = x + torch.cat(positions)[:, None].float() / 8
        seqlens = torch.repeat_interleave(grid[:, 1] * grid[:, 2], grid[:, 0])
        cu = F.pad(seqlens.cumsum(0, dtype=torch.int32), (1, 0))
        q, k, v = self.qkv(x).reshape(x.shape[0], 3, 2, 8).permute(1, 2, 0, 3)[:, None].unbind(0)
        lengths = cu[1:] - cu[:-1]
        splits = [
            torch.split(t, lengths.tolist(), dim=2) for t in (q, k, v)
        ]
        outs = [_attend(a, b, c) for a, b, c in zip(*splits)]  # noqa: B905 - as transformers
        out = torch.cat(outs, dim=1)
        return out.reshape(x.shape[0], -1)


def _inputs(seed: int, grid):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(48, 16, generator=g), torch.tensor(grid)


# every grid covers 48 rows: the frames' sizes differ; some of one row, one of none
GRIDS = ([[1, 4, 4], [2, 4, 4]], [[3, 4, 4], [0, 4, 4]], [[1, 2, 8], [2, 4, 4]],
         [[1, 1, 1], [47, 1, 1]], [[1, 0, 7], [3, 4, 4]], [[6, 2, 2], [1, 4, 6]])


@pytest.fixture(scope="module")
def packed_program():
    torch.manual_seed(0)
    model = PackedAttention().eval()
    args = _inputs(0, GRIDS[0])
    return model, stitch.export(model, args, examples=[(_inputs(1, GRIDS[0]), {})])


def test_packed_attention_is_one_while_loop_for_every_grid(packed_program):
    model, program = packed_program
    with pytest.raises(Exception, match="data-dependent"):  # the premise
        torch.export.export(model, _inputs(0, GRIDS[0]), strict=False)
    assert program.report.graphs_after == 1, str(program.report)
    loops = [n for n in program.exported_program.graph.nodes
             if n.op == "call_function" and "while_loop" in str(n.target)]
    assert len(loops) == 1
    assert any("split by sizes from data" in d.reason and "lengths.tolist()" in d.reason
               for d in program.report.decisions), str(program.report)
    # the loop over the images has no break once scalar reads are captured: not "left"
    assert all(d.action != Action.LEFT for d in program.report.decisions), str(program.report)
    for seed, grid in enumerate(GRIDS, 2):  # the examples had one grid only
        args = _inputs(seed, grid)
        torch.testing.assert_close(program(*args), model(*args), rtol=0, atol=0)


class ZippedSplits(nn.Module):
    """Two splits zipped, by the method, along the last dimension; a sum per segment."""

    def forward(self, x, counts):
        counts = counts[counts >= 0]  # all of them, but their number known only at run time
        a = x.split(counts.tolist(), dim=-1)
        b = (x * 2).split(counts.tolist(), -1)
        return torch.cat([(p * q).cumsum(-1) for p, q in zip(a, b, strict=True)], -1)


class OneSplit(nn.Module):
    """One split iterated alone, default dims, the list built by a generator."""

    def forward(self, x, counts):
        counts = counts[counts >= 0]
        parts = torch.split(x, counts.tolist())
        return torch.cat(tuple(p.softmax(0) for p in parts))


@pytest.mark.parametrize("model_type, shape", [(ZippedSplits, (3, 10)), (OneSplit, (10, 3))])
def test_other_spellings_are_one_graph_for_every_sizes(model_type, shape):
    model = model_type()

    def inputs(seed, counts):
        g = torch.Generator().manual_seed(seed)
        return torch.randn(*shape, generator=g), torch.tensor(counts)

    program = stitch.export(model, inputs(0, [4, 6]), examples=[(inputs(1, [4, 6]), {})])
    assert program.report.graphs_after == 1, str(program.report)
    assert any("split by sizes from data" in d.reason for d in program.report.decisions)
    for seed, counts in enumerate(([1, 9], [5, 5], [0, 10], [10, 0], [2, 8]), 2):
        args = inputs(seed, counts)
        torch.testing.assert_close(program(*args), model(*args), rtol=0, atol=0)


class PackedUnbacked(nn.Module):
    """The packed sequence's own length known only at run time (rows kept by a mask, as a
    window index selects them): torch.cond gives the loop's carried output a fresh size."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(16, 48)

    def forward(self, x, grid, keep):
        x = x[keep]
        seqlens = torch.repeat_interleave(grid[:, 1] * grid[:, 2], grid[:, 0])
        cu = F.pad(seqlens.cumsum(0, dtype=torch.int32), (1, 0))
        q, k, v = self.qkv(x).reshape(x.shape[0], 3, 2, 8).permute(1, 2, 0, 3)[:, None].unbind(0)
        lengths = cu[1:] - cu[:-1]
        splits = [torch.split(t, lengths.tolist(), dim=2) for t in (q, k, v)]
        outs = [_attend(a, b, c) for a, b, c in zip(*splits)]  # noqa: B905 - as transformers
        return torch.cat(outs, dim=1).reshape(x.shape[0], -1)


def _kept(seed: int, grid, rows: int):
    g = torch.Generator().manual_seed(seed)
    keep = torch.zeros(60, dtype=torch.bool)
    keep[torch.randperm(60, generator=g)[:rows]] = True
    return torch.randn(60, 16, generator=g), torch.tensor(grid), keep


def test_a_packed_length_known_only_at_run_time_is_one_while_loop():
    torch.manual_seed(0)
    model = PackedUnbacked().eval()
    grid = [[1, 4, 4], [2, 4, 4]]
    program = stitch.export(model, _kept(0, grid, 48), examples=[(_kept(1, grid, 48), {})])
    assert program.report.graphs_after == 1, str(program.report)
    assert any("split by sizes from data" in d.reason for d in program.report.decisions)
    # other packed lengths, one row among them, and frames of 0 and 1 rows
    for seed, (g, rows) in enumerate((([[3, 4, 4], [0, 4, 4]], 48), ([[1, 2, 4], [1, 4, 4]], 24),
                                      ([[1, 1, 1], [0, 3, 3]], 1), ([[5, 1, 1], [1, 5, 7]], 40)), 2):
        args = _kept(seed, g, rows)
        torch.testing.assert_close(program(*args), model(*args), rtol=0, atol=0)


class FiltersSegments(nn.Module):
    def forward(self, x, counts):
        counts = counts[counts >= 0]
        parts = torch.split(x, counts.tolist())
        return torch.cat([p * 2 for p in parts if p.shape[0] > 1])


class SumsEachSegment(nn.Module):
    def forward(self, x, counts):
        counts = counts[counts >= 0]
        parts = torch.split(x, counts.tolist())
        return torch.cat([p.sum(0, keepdim=True) for p in parts])  # one row per segment


class RowForEmptySegment(nn.Module):
    """The map gives a row for a segment of none: the program must keep that row."""

    def forward(self, x, counts):
        counts = counts[counts >= 0]
        parts = torch.split(x, counts.tolist())
        return torch.cat([_row_if_empty(p) for p in parts])


def _row_if_empty(p):
    if p.shape[0] == 0:
        return torch.full((1, p.shape[1]), 7.0)
    return p * 2


@pytest.mark.parametrize("model_type", [FiltersSegments, SumsEachSegment, RowForEmptySegment])
def test_a_map_the_loop_cannot_hold_is_refused(model_type):
    """A filter is left as written; a segment's result of another length fails the
    program's check while exporting: both refused naming the line, never served."""
    x, counts = torch.randn(10, 3), torch.tensor([4, 6])
    with pytest.raises(stitch.StitchError) as caught:
        stitch.export(model_type(), (x, counts))
    assert "test_split_map.py:" in str(caught.value), str(caught.value)


def test_a_row_for_an_empty_segment_is_refused_naming_the_rule():
    """The loop writes nothing for a segment of no rows: a map giving one there would lose
    it (eager: 9 rows, the program 8), so the export is refused saying why."""
    with pytest.raises(stitch.StitchError, match="for a segment of none"):
        stitch.export(RowForEmptySegment(), (torch.randn(8, 3), torch.tensor([3, 5])))


def test_the_helper_in_eager_is_the_python_it_replaced():
    x = torch.arange(10.0).reshape(5, 2)
    sizes = torch.tensor([2, 0, 3])
    got = split_map_cat(lambda p: p.flip(0), (x,), sizes, 0, 0)
    want = torch.cat([p.flip(0) for p in torch.split(x, [2, 0, 3])])
    assert torch.equal(got, want)
    with pytest.raises(RuntimeError, match="split_with_sizes expects"):
        split_map_cat(lambda p: p, (x,), torch.tensor([2, 2]), 0, 0)  # as eager raises


class ResizedPerImage(nn.Module):
    """A table resized per image to sizes read from the grid (antialiased: torch traces no
    such resize to a size from data), then attention per image: with the split rewritten,
    the break left is the resize, whose sizes were read on the loop's line."""

    def __init__(self):
        super().__init__()
        self.table = nn.Parameter(torch.randn(1, 8, 6, 6))

    def forward(self, x, grid):
        chunks = []
        for t, h, w in grid.tolist():
            r = F.interpolate(self.table, size=(h, w), mode="bilinear", antialias=True)
            chunks.append(r.flatten(2)[0].T.repeat(t, 1))
        x = x + torch.cat(chunks)
        lengths = torch.repeat_interleave(grid[:, 1] * grid[:, 2], grid[:, 0])
        return torch.cat([p.softmax(0) for p in torch.split(x, lengths.tolist())])


def test_reads_elsewhere_in_the_function_are_pinned_on_request():
    """The refusal says guards would give a program, and they do: the grid's read pinned."""
    model = ResizedPerImage()

    def inputs(seed, grid):
        return torch.randn(24, 8, generator=torch.Generator().manual_seed(seed)), \
            torch.tensor(grid)

    with pytest.raises(stitch.StitchError, match="allow_guards=True"):
        stitch.export(model, inputs(0, [[2, 3, 4]]))
    program = stitch.export(model, inputs(0, [[2, 3, 4]]),
                            settings=stitch.Settings(allow_guards=True))
    assert program.report.graphs_after == 1, str(program.report)
    args = inputs(1, [[2, 3, 4]])
    torch.testing.assert_close(program(*args), model(*args), rtol=0, atol=0)
    with pytest.raises(Exception, match="SpecializationError|pinned"):
        program(*inputs(2, [[1, 4, 6]]))


class RebindsInTheBlockOfTheCat(nn.Module):
    def forward(self, x, counts):
        counts = counts[counts >= 0]
        parts = torch.split(x, counts.tolist())
        with torch.no_grad():
            x = x.clamp(max=3.0)  # the segments were taken before: the cat must not see this
            out = torch.cat([p * 2 for p in parts])
        return out + x


class WritesInPlaceBetween(nn.Module):
    def forward(self, x, counts):
        counts = counts[counts >= 0]
        h = x * 1
        outs = [p * 2 for p in h.split(counts.tolist())]
        h.clamp_(max=3.0)  # after the map in eager
        return torch.cat(outs) + h


@pytest.mark.parametrize("model_type", [RebindsInTheBlockOfTheCat, WritesInPlaceBetween])
def test_what_runs_between_the_map_and_the_cat_is_never_moved_past(model_type):
    """Moved past, both would be one graph that matches the examples (values under 3) and
    gives 9 where eager gives 11 above them. Left as written: refused, or a program exact on
    such values."""
    model = model_type()
    counts = torch.tensor([2, 4])
    try:
        program = stitch.export(model, (torch.randn(6) * 0.5, counts),
                                examples=[((torch.randn(6) * 0.5, counts), {})])
    except stitch.StitchError as refused:  # left as written: its break named
        assert "test_split_map.py:" in str(refused), str(refused)
        return
    x = torch.arange(1.0, 7.0)
    torch.testing.assert_close(program(x, counts), model(x, counts), rtol=0, atol=0)


def test_sizes_eager_refuses_are_refused_by_the_program():
    """torch.split raises on sizes that do not sum to the length; so does the program
    (unchecked, it would return zeros or overwrite the last row)."""
    model = OneSplit()
    x = torch.randn(10, 3)
    program = stitch.export(model, (x, torch.tensor([4, 6])))
    for bad in ([4, 4], [6, 5], [11, 0]):
        with pytest.raises(RuntimeError, match="split_with_sizes"):
            model(x, torch.tensor(bad))
        with pytest.raises(RuntimeError, match="split sizes that do not cover|Runtime assertion"):
            program(x, torch.tensor(bad))
