"""A loop over ``range(n)``, ``n`` a size from data with a static bound, whose body writes
tensors by index *and* carries a name into the next iteration (transformers 4.52's Grounding
DINO ``generate_masks_with_special_tokens_and_transfer_map``: a block of the attention mask
per span between special tokens, the previous token's column carried). A while_loop body
cannot write into a tensor from outside it, nor read the slice bounds as numbers: the loop
is unrolled to its bound (``bounded_loop``), the carried name each iteration's cond output,
and the stores in the body read their 0-d tensor indices and tensor slice bounds as numbers,
as Python does (``slice_bounds``, ``rt_slices.store_slice``)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import stitch
from stitch.plan import Action

SPECIAL = (101, 102)


def span_masks(ids):
    """A span's tokens attend to each other; special tokens start a new span."""
    batch, n = ids.shape
    special = torch.zeros((batch, n), dtype=torch.bool)
    for token in SPECIAL:
        special |= ids == token
    idxs = torch.nonzero(special)
    mask = torch.eye(n).bool().unsqueeze(0).repeat(batch, 1, 1)
    pos = torch.zeros((batch, n))
    previous = 0
    for i in range(idxs.shape[0]):
        row, col = idxs[i]
        if (col == 0) or (col == n - 1):
            mask[row, col, col] = True
            pos[row, col] = 0
        else:
            mask[row, previous + 1: col + 1, previous + 1: col + 1] = True
            pos[row, previous + 1: col + 1] = torch.arange(0, col - previous)
        previous = col
    return mask, pos.long()


class SpanMasks(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(200, 4)

    def forward(self, ids):
        mask, pos = span_masks(ids)
        return self.emb(ids) * pos.unsqueeze(-1) + mask.float().sum(-1, keepdim=True)


class Segments(nn.Module):
    """Written otherwise: the carried value a running start (a tensor after the first
    iteration), the count ``len()`` of a masked tensor, one bounded slice per store."""

    def forward(self, x, ends):
        ends = ends[ends > 0]
        out = torch.zeros_like(x)
        start = 0
        for i in range(len(ends)):
            out[start: ends[i]] = x[start: ends[i]].cumsum(0)
            start = ends[i]
        return out


def _ids(*rows):
    return torch.tensor(rows)


@pytest.fixture(scope="module")
def spans():
    model = SpanMasks().eval()
    args = (_ids([101, 5, 6, 102, 7, 8, 9, 102]),)
    example = ((_ids([101, 3, 102, 3, 3, 3, 3, 3]),), {})
    with pytest.raises(Exception, match="data-dependent"):  # the premise: export refuses it
        torch.export.export(model, args, strict=False)
    return model, stitch.export(model, args, examples=[example])


def test_carried_loop_is_one_graph_exact(spans):
    model, program = spans
    assert program.report.graphs_after == 1, str(program.report)
    assert any("previous" in d.reason and "unrolled" in d.reason
               for d in program.report.decisions), str(program.report)
    for ids in (_ids([101, 1, 2, 3, 102, 4, 5, 102]), _ids([101, 1, 1, 1, 1, 1, 1, 1]),
                _ids([101, 102, 101, 102, 101, 102, 101, 102]), _ids([3, 3, 3, 3, 3, 3, 3, 3])):
        a, b = model(ids), program(ids)
        torch.testing.assert_close(b, a, rtol=0, atol=0)


def test_carried_loop_written_otherwise():
    model = Segments()
    x = torch.arange(12.0).reshape(6, 2)
    args = (x, torch.tensor([2, 0, 5, 0]))
    program = stitch.export(model, args, examples=[((x + 1, torch.tensor([0, 3, 0, 6])), {})])
    assert program.report.graphs_after == 1, str(program.report)
    for ends in ([1, 2, 3, 6], [0, 0, 0, 0], [6, 0, 0, 0], [0, 0, 4, 0]):
        e = torch.tensor(ends)
        torch.testing.assert_close(program(x * 2, e), model(x * 2, e), rtol=0, atol=0)


@pytest.mark.parametrize("key", [
    (torch.tensor(1), slice(torch.tensor(1), torch.tensor(4)), slice(1, None)),
    (-1, slice(None, torch.tensor(2))),
    (torch.tensor(0), torch.tensor(2)),
    (slice(torch.tensor(1), None),),
    (torch.tensor([0, 1]), slice(0, torch.tensor(2))),  # a 1-d index: advanced, as written
])
@pytest.mark.parametrize("value", [True, 7, torch.tensor([1.5, 2.5, 3.5, 4.5, 5.5])[:1]])
def test_store_slice_stores_what_python_stores(key, value):
    from stitch.synthesize.operators.rt_slices import store_slice

    want, got = torch.zeros(3, 5, 5, dtype=torch.long), torch.zeros(3, 5, 5, dtype=torch.long)
    try:
        want[key] = value
    except RuntimeError as e:  # Python refuses it (a float into long by a 1-d index): so too
        with pytest.raises(type(e)):
            store_slice(got, key, value)
        return
    store_slice(got, key, value)
    assert torch.equal(got, want)


def test_branch_in_the_body_that_example_0_never_reaches():
    """Example 0 holds no special token: the census runs the loop zero times and never sees
    the `if` in its body; the unrolled loop's cond trace meets it, and the next round makes
    it a cond too (``rounds._break_in_traced_branch``, the innermost error's site)."""
    model = SpanMasks().eval()
    args = (_ids([3, 5, 6, 10, 7, 9, 8, 4]),)
    example = ((_ids([101, 5, 6, 102, 7, 8, 9, 102]),), {})
    program = stitch.export(model, args, examples=[example])
    assert program.report.graphs_after == 1, str(program.report)
    lines = {d.location for d in program.report.decisions if d.action == Action.COND}
    assert len(lines) == 2, lines  # the loop's line and the `if` in its body
    for ids in (_ids([101, 1, 2, 3, 102, 4, 5, 102]), _ids([3, 3, 3, 3, 3, 3, 3, 3])):
        torch.testing.assert_close(program(ids), model(ids), rtol=0, atol=0)
