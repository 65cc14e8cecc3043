"""An ``if`` on a Python value inside a cond arm (LongCat-Flash's zero-compute experts: the
unrolled expert loop's own index ``e``, ``if e >= self.n: identity else: weights[e]``) takes
only its side while the arm is traced, as Python does. Made a ``torch.where``, both sides
would be traced, and the weights past the last real expert do not exist: the census would
fail (``TypeError when making fake tensor call``) and the model be refused."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import stitch


class ZeroComputeExperts(nn.Module):
    def __init__(self, real: int = 4, identity: int = 2, width: int = 8):
        super().__init__()
        self.real, self.total = real, real + identity
        self.weights = nn.Parameter(torch.randn(real, width, width))
        self.router = nn.Linear(width, self.total)

    def forward(self, x):
        top_w, top_i = self.router(x).softmax(-1).topk(2, dim=-1)
        out = torch.zeros_like(x)
        mask = F.one_hot(top_i, num_classes=self.total).permute(2, 1, 0)
        for e_t in torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero():
            e = int(e_t.item())
            sel, tok = torch.where(mask[e].squeeze(0))
            if tok.numel() == 0:
                continue
            cur = x[tok]
            if e >= self.real:  # an identity expert: no weights
                y = cur
            else:
                y = cur @ self.weights[e]
            out.index_add_(0, tok, y * top_w[tok, sel, None])
        return out


def test_an_if_on_the_unrolled_index_takes_its_side_and_the_model_is_one_graph():
    torch.manual_seed(0)
    model = ZeroComputeExperts()
    xs = [torch.randn(5, 8) for _ in range(6)]
    program = stitch.export(model, (xs[0],), examples=[((xs[1],), {})])
    assert program.report.graphs_after == 1, program.report
    for x in xs[2:]:
        torch.testing.assert_close(program(x), model(x), rtol=0, atol=0)
