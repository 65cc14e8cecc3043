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
