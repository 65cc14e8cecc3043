"""A read the rewrites keep as a 0-d tensor that reaches an op taking a Python number (a size
list: torch_geometric's ``to_dense_batch``) is left to torch.export, which keeps the number
symbolic; the program is verified as any other (``rewrite_export.LEFT_KINDS``)."""

from __future__ import annotations

import torch

import stitch


class DenseBatch(torch.nn.Module):
    """``to_dense_batch`` shortened: a buffer of ``groups * most + 1`` rows, both read."""

    def forward(self, x, batch):
        groups = int(batch.max()) + 1
        counts = torch.bincount(batch, minlength=groups)
        most = int(counts.max())
        size = [groups * most + 1] + list(x.size())[1:]
        out = torch.as_tensor(0.0, dtype=x.dtype).repeat(size)
        start = torch.cat([counts.new_zeros(1), counts.cumsum(0)])
        out[torch.arange(batch.size(0)) - start[batch] + batch * most] = x
        return out[:groups * most].view([groups, most] + list(x.size())[1:])


def test_a_buffer_sized_by_reads_is_one_graph_exact_on_other_groupings():
    model = DenseBatch()
    first = (torch.randn(5, 3), torch.tensor([0, 0, 1, 1, 1]))
    second = (torch.randn(7, 3), torch.tensor([0, 1, 1, 2, 2, 2, 2]))
    program = stitch.export(model, first, examples=[(second, {})])
    assert program.report.graphs_after == 1
    for x, batch in (first, second, (torch.randn(5, 3), torch.tensor([0, 1, 2, 2, 3])),
                     (torch.randn(2, 3), torch.tensor([0, 0]))):
        assert torch.equal(program(x, batch), model(x, batch))
