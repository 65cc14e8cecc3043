"""``Tensor.take_along_dim`` makes torch.export (non-strict, torch 2.14.1) fix its input's
size along ``dim`` as a constant, with no stitch code and no error: the program raises
``Guard failed`` on any other size, where the model accepts it. ``torch.gather`` with the
same indices keeps the size symbolic.

torch_geometric's ``MedianAggregation``/``QuantileAggregation`` sort the node features and
then their group index with ``index.take_along_dim(x_perm, dim=dim)`` (quantile.py:98), so
the number of nodes is fixed to the traced example's. While stitch traces, a shim spells
``take_along_dim`` as ATen does, with ``broadcast_to`` and ``gather``
(``stitch/synthesize/operators/shims.py``), so the size stays symbolic there.

Measured 2026-12-04 (torch 2.14.1+cu130, both inputs 10x4, dim 0 ``Dim.AUTO``): traced
input shapes ``TakeAlongDim [(10, 4), (s37, 4)]`` (the values fixed), ``Gather [(s59, 4), (s37, 4)]``.

Usage: python experiments/repro_take_along_dim.py   (a few seconds)
"""

from __future__ import annotations

import torch
from torch.export import Dim


class TakeAlongDim(torch.nn.Module):
    def forward(self, values, perm):
        return values.take_along_dim(perm, dim=0)


class Gather(torch.nn.Module):
    def forward(self, values, perm):
        return torch.gather(values, 0, perm)


def traced_shapes(model: torch.nn.Module) -> list:
    values = torch.randint(0, 3, (10, 4))
    perm = torch.argsort(torch.randn(10, 4), dim=0)
    ep = torch.export.export(model, (values, perm), strict=False,
                             dynamic_shapes=({0: Dim.AUTO}, {0: Dim.AUTO}))
    return [tuple(n.meta["val"].shape) for n in ep.graph.nodes if n.op == "placeholder"]


if __name__ == "__main__":
    print("torch", torch.__version__)
    for model in (TakeAlongDim(), Gather()):
        print(f"{type(model).__name__:14s} {traced_shapes(model)}")
