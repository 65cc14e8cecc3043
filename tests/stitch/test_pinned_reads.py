"""Scalar reads that size the program (segment lengths, a grid read with ``.tolist()``):
refused by default, naming the reads and what ``allow_guards`` would do; asked for guards,
pinned to example 0's values with a check in the graph, so the program is exact for inputs
of those values and raises SpecializationError, naming the read, for any other."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import stitch


class Segments(nn.Module):
    """Attention-like work per segment, its lengths and a grid read from tensors (the shape
    of Qwen-style vision towers: positions from a grid, attention split by lengths)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x, lengths, repeats, grid):
        h = self.lin(x)
        rows = []
        for height, width in grid.tolist():
            for i in range(height):  # a Python loop counted by a value in the input
                rows.append(torch.full((width,), float(i)))
        positions = torch.cat(rows)
        counts = grid[:, 0] * grid[:, 1]  # each patch's index within its image:
        starts = torch.repeat_interleave(counts.cumsum(0) - counts, counts)
        within = torch.arange(counts.sum()) - starts  # two sizes from data meet
        segments = torch.repeat_interleave(lengths, repeats)  # how many: data too
        parts = [part.softmax(0) for part in torch.split(h, segments.tolist())]
        return torch.cat(parts) + positions[:, None] + within[:, None]


def _inputs(seed: int, lengths=(2, 1), repeats=(1, 4), grid=((2, 3),)):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(6, 4, generator=g), torch.tensor(lengths), torch.tensor(repeats),
            torch.tensor(grid))


def test_plain_export_refuses_the_model():
    with pytest.raises(Exception):  # noqa: B017 - the premise: torch.export alone fails
        torch.export.export(Segments().eval(), _inputs(0), strict=False)


def test_refused_by_default_naming_the_reads_to_pin():
    with pytest.raises(stitch.StitchError) as info:
        stitch.export(Segments().eval(), _inputs(0), examples=[(_inputs(1), {})])
    text = str(info.value)
    assert "Settings(allow_guards=True) pins those reads" in text
    assert f"{__file__}:26" in text and f"{__file__}:34" in text  # the two reads, by line


def test_pinned_reads_give_one_exact_graph_that_refuses_other_values():
    from stitch.plan import Action
    model = Segments().eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    program = stitch.export(model, _inputs(0), examples=[(_inputs(1), {})],
                            settings=stitch.Settings(allow_guards=True))
    assert program.report.graphs_after == 1
    guards = program.report.guards  # the two reads; the sizes lines 31-33 make stay symbolic
    assert sum("pinned to example 0's value" in g for g in guards) == 2 and len(guards) == 2
    symbolic = {int(d.location.rsplit(":", 1)[1]) for d in program.report.decisions
                if d.action == Action.SYMBOLIC}
    assert {31, 32, 33} <= symbolic
    for seed in (0, 1, 2):  # new data, the same lengths and grid: exact
        torch.testing.assert_close(program(*_inputs(seed)), model(*_inputs(seed)),
                                   rtol=0, atol=0)
    # other lengths; as many segments but another cut; more segments; another grid
    for other in (_inputs(3, lengths=(4, 1), repeats=(1, 2)), _inputs(3, repeats=(2, 2)),
                  _inputs(3, lengths=(1, 1), repeats=(2, 4)), _inputs(3, grid=((3, 2),))):
        model(*other)  # the model takes it
        with pytest.raises(stitch.SpecializationError, match="stitch pinned"):
            program(*other)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())



def _boundaries(sizes, traced=False):
    bounds = [0]
    bounds.extend(sizes.cumsum(0).tolist())  # a read no site names
    return torch.tensor(bounds + ([object()] if traced else []))  # where a trace stops


def test_a_failed_export_widens_the_pins_to_the_reads_of_its_function():
    """Where pinning the sites' own reads is not enough (the export then stops where a read
    elsewhere in the function reaches a size), the retry pins every read of the functions
    holding the sites and of the one the export stopped in."""
    from stitch.errors import ExportFailedError
    from stitch.pinned_reads import _failed_at, _Pins
    from stitch.synthesize.operators.rt_pins import recording

    with recording() as reads:
        _boundaries(torch.tensor([2, 4]))
    try:
        _boundaries(torch.tensor([2, 4]), traced=True)
    except (RuntimeError, TypeError) as cause:  # a value the op cannot take, as if traced
        failed = ExportFailedError("torch.export refused the rewritten model")
        failed.__cause__ = cause
    first = _boundaries.__code__.co_firstlineno
    frames = _failed_at(failed)
    assert [(f.filename, f.lineno) for f in frames] == [(__file__, first + 3)]
    pins = _Pins()
    assert not pins.add(frames, reads, {})  # the line it stopped at reads nothing itself
    assert pins.add(frames, reads, {}, whole=True)  # its function does
    assert list(pins.reads) == [f"{__file__}:{first + 2}"]



def _rows_of(count):  # a helper the model calls: the read sits outside forward
    return int(count)


class Counted(nn.Module):
    """A read written otherwise: ``int()`` of a 0-d tensor, inside a helper."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x, count):
        table = torch.arange(_rows_of(count) * 4, dtype=x.dtype).reshape(-1, 4)
        return self.lin(x) + table.sum(0)


def test_a_read_by_int_in_a_helper_that_sizes_a_tensor_needs_no_pin():
    """The read sizes ``torch.arange``: torch.export keeps that size symbolic, so the program
    takes every count without a guard (guards allowed or not)."""
    from stitch.plan import Action

    model = Counted().eval()

    def inputs(seed, count=3):
        g = torch.Generator().manual_seed(seed)
        return (torch.randn(2, 4, generator=g), torch.tensor(count))

    for guards in (False, True):
        program = stitch.export(model, inputs(0), examples=[(inputs(1), {})],
                                settings=stitch.Settings(allow_guards=guards))
        assert program.report.graphs_after == 1 and not program.report.guards
        assert any(d.action == Action.SYMBOLIC for d in program.report.decisions)
        for count in (3, 4, 7):
            torch.testing.assert_close(program(*inputs(3, count)), model(*inputs(3, count)),
                                       rtol=0, atol=0)
