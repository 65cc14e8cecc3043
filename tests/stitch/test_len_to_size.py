"""``len()`` of a tensor whose length comes from data (stitch/synthesize/canonicalize/len_to_size.py):
torch.export needs a Python int there (torchvision's ``num_rois = len(rois)`` after NMS)."""

from __future__ import annotations

import pytest
import torch

import stitch


class CountsKeptRows(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(6, 6)

    def forward(self, x):
        h = self.lin(x)
        rows = h[(h[:, 0] > 0).nonzero()[:, 0]]
        groups = [rows, rows[:1]]
        n = len(rows)  # a tensor: its size; a list keeps Python's len
        out = torch.zeros((n, 6)) + rows * 2
        return out, len(groups) + out.sum()


def kept_count(rows):
    return len(rows)  # in a helper: the rewrite applies where torch.export stopped


class CountsInAHelper(CountsKeptRows):
    def forward(self, x):
        h = self.lin(x)
        rows = h[(h[:, 0] > 0).nonzero()[:, 0]]
        return torch.ones(kept_count(rows), 2) * rows[:, :2]


def _none_kept(model):
    w, b = model.lin.weight[0].detach(), model.lin.bias[0].detach()
    return (-w / w.dot(w) * (b.abs() + 10)).expand(5, 6).clone()  # lin(row)[0] < 0


def test_torch_export_alone_stops_at_the_len():
    x = torch.randn(5, 6, generator=torch.Generator().manual_seed(1))
    with pytest.raises(Exception, match="specialized integer"):
        torch.export.export(CountsKeptRows(), (x,))


def test_len_of_a_tensor_sized_from_data_is_its_symbolic_size():
    model = CountsKeptRows()
    x = torch.randn(5, 6, generator=torch.Generator().manual_seed(1))
    program = stitch.export(model, (x,))
    assert program.report.graphs_after == 1, str(program.report)
    assert any("len() of a tensor" in d.reason for d in program.report.decisions)
    for v in (x, -x, x * 3, _none_kept(model)):
        with torch.no_grad():
            got, want = program(v), model(v)
        assert got[0].shape == want[0].shape and torch.equal(got[0], want[0])
        assert torch.equal(got[1], want[1])


def test_len_in_a_helper_the_forward_calls():
    model = CountsInAHelper()
    x = torch.randn(5, 6, generator=torch.Generator().manual_seed(1))
    program = stitch.export(model, (x,))
    assert program.report.graphs_after == 1, str(program.report)
    for v in (x, -x, _none_kept(model)):
        with torch.no_grad():
            assert torch.equal(program(v), model(v))


def test_length_is_pythons_len_for_everything_else():
    from stitch.synthesize.operators.rt_slices import length

    assert length([1, 2, 3]) == 3 and length(torch.zeros(4, 2)) == 4
    with pytest.raises(TypeError, match="0-d"):
        length(torch.tensor(1.0))


def _no_match(dm):
    return torch.empty(0, 1, dtype=dm.dtype), torch.empty(0, 2, dtype=torch.long)


class RatioMatcher(torch.nn.Module):
    """kornia's ``match_snn``: an early return on ``len(rows) == 0`` where the rows are the
    ones a mask kept (their number is data)."""

    def forward(self, desc1, desc2):
        dm = torch.cdist(desc1, desc2)
        vals, idxs_in_2 = torch.topk(dm, 2, dim=1, largest=False)
        ratio = vals[:, 0] / vals[:, 1]
        mask = ratio <= 0.8
        match_dists = ratio[mask]
        if len(match_dists) == 0:
            return _no_match(dm)
        idxs_in1 = torch.arange(0, idxs_in_2.size(0))[mask]
        return match_dists.view(-1, 1), torch.cat(
            [idxs_in1.view(-1, 1), idxs_in_2[:, 0][mask].view(-1, 1)], 1)


def test_len_of_rows_a_mask_kept_in_a_branch_test_is_their_symbolic_count():
    g = torch.Generator().manual_seed(0)
    def pair(r):  # half the rows of desc1 have a near copy in desc2: those match
        d1 = torch.randn(r, 16, generator=g)
        near = d1[: r // 2] + 0.01 * torch.randn(r // 2, 16, generator=g)
        return d1, torch.cat([near, torch.randn(r - r // 2 + 3, 16, generator=g)])

    pairs = [pair(r) for r in (8, 16, 12)]
    model = RatioMatcher()
    program = stitch.export(model, pairs[0], examples=[(pairs[1], {})])
    far = (torch.randn(8, 16, generator=g), torch.randn(11, 16, generator=g) * 100)  # none
    assert len(model(*far)[0]) == 0 < len(model(*pairs[0])[0])  # both sides are asked
    for args in (*pairs, far):
        got, want = program(*args), model(*args)
        assert [t.shape for t in got] == [t.shape for t in want]
        for a, b in zip(got, want, strict=True):
            torch.testing.assert_close(a, b)


class InversePermutation(torch.nn.Module):
    """torch_geometric's SGFormer: ``rev_perm[indices] = torch.arange(len(indices))``, where
    ``len`` of a tensor whose length is a dynamic size made it a constant."""

    def forward(self, x):
        order = x[:, 0].argsort()
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(len(order))
        return x[order][inverse] * 2 + inverse[:, None]


def test_len_of_a_dynamic_size_in_any_statement_stays_symbolic():
    model = InversePermutation()
    program = stitch.export(model, (torch.randn(10, 3),), examples=[((torch.randn(7, 3),), {})])
    for n in (1, 4, 19):
        x = torch.randn(n, 3)
        assert torch.equal(program(x), model(x))


class LenReturned(torch.nn.Module):
    def forward(self, x):
        return torch.arange(len(x)).float() + x[:, 0]


class LenAugmented(torch.nn.Module):
    def forward(self, x):
        y = x[:, 0].clone()
        y += torch.arange(len(x))
        return y


@pytest.mark.parametrize("model", [LenReturned(), LenAugmented()], ids=lambda m: type(m).__name__)
def test_len_of_a_dynamic_size_in_a_return_or_augmented_assignment(model):
    program = stitch.export(model, (torch.randn(10, 3),), examples=[((torch.randn(7, 3),), {})])
    for n in (1, 4, 19):
        x = torch.randn(n, 3)
        assert torch.equal(program(x), model(x))
