"""An `if` on a size that comes from data (after ``nonzero()`` or mask indexing):
torch.export cannot guard on it (a UserError, not a Dynamo break), torch.cond takes it as
its predicate. The early-exit-on-empty pattern of detection post-processing
(torchvision's ``batched_nms``: ``if boxes.numel() == 0: return torch.empty(0)``)."""

from __future__ import annotations

import torch
from torch import nn

import stitch


def keep_strong(boxes, scores):
    if boxes.numel() == 0:
        return torch.empty((0,), dtype=torch.int64)
    top = boxes.max()  # fails on an empty tensor: the early exit matters
    return (scores > top * 0.1).nonzero()[:, 0]


class FiltersThenKeeps(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x)
        boxes = h[(h[:, 0] > 0).nonzero()[:, 0]]
        return keep_strong(boxes, boxes[:, 1])


def test_the_site_is_a_branch_in_the_census():
    x = torch.randn(16, 4, generator=torch.Generator().manual_seed(1))
    census = stitch.explain(FiltersThenKeeps(), (x,))
    size_if = [s for s in census.sites if "boxes.numel() == 0" in s.source_line]
    assert [s.kind.value for s in size_if] == ["branch"], str(census)


def test_a_branch_on_a_data_dependent_size_is_one_verified_cond():
    model = FiltersThenKeeps()
    x = torch.randn(16, 4, generator=torch.Generator().manual_seed(1))
    program = stitch.export(model, (x,), examples=[((x * 2,), {})])
    assert program.report.graph_ops.get("cond") == 1, str(program.report)
    assert any(c.what.endswith("forced true") for c in program.report.checks), \
        str(program.report)
    named = {(d.site, d.location) for d in program.report.decisions if d.site}
    assert len({site for site, _ in named}) == len(named), "two places share one site id"
    w, b = model.lin.weight[0].detach(), model.lin.bias[0].detach()
    row = -w / w.dot(w) * (b.abs() + 10)  # lin(row)[0] = b - |b| - 10 < 0
    nothing_kept = row.expand(16, 4).clone()  # every row filtered out: the early exit
    for v in (x, x * 3, -x, nothing_kept):
        with torch.no_grad():
            got, want = program(v), model(v)
        assert got.shape == want.shape and torch.equal(got, want)
    with torch.no_grad():  # the last input reaches the early exit
        assert model.lin(nothing_kept)[:, 0].max() < 0


class SizedByATensor(nn.Module):
    """PhiMoE 4.52's rotary table: ``torch.arange(seq_len)`` with ``seq_len`` a tensor (a
    scalar read inside the op, which torch.export captures), then a branch on a size from
    data that needs its cond."""

    def __init__(self) -> None:
        super().__init__()
        self.freq = nn.Parameter(torch.linspace(0.1, 1.0, 8), requires_grad=False)

    def forward(self, x, positions):
        seq_len = positions[-1] + 1
        table = torch.outer(torch.arange(seq_len, dtype=torch.float32), self.freq)
        out = x + table[positions]
        picked = torch.where(out.sum(-1) > 4)[0]
        if picked.shape[0] == 0:
            return out
        return out.index_add(0, picked, out[picked])


def test_an_op_sized_by_a_tensor_is_captured_like_torch_export_does():
    model = SizedByATensor()
    x, positions = torch.rand(6, 8), torch.arange(6)
    program = stitch.export(model, (x, positions), examples=[((x * 0, positions), {})])
    actions = {d.action.value for d in program.report.decisions}
    assert "symbolic size" in actions and "torch.cond" in actions
    for inputs in ((x, positions), (x * 0, positions), (x * 3, positions)):
        torch.testing.assert_close(program(*inputs), model(*inputs))
