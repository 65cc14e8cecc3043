"""``torch.sym_sum`` (Python's ``sum`` over sizes in a cond arm, as Dynamo traces it) is
written as a chain of additions, so the program saves with ``torch.export.save``; a stitched
program holding one saves, loads and computes what the model does."""

from __future__ import annotations

import io
import operator

import pytest
import torch
import torch.utils._pytree as pytree
from torch import nn

import stitch
from stitch.lower.sym_ops import serializable_sym_ops


class SumsInAnArm(torch.nn.Module):
    def forward(self, x, k):
        def true_fn(x, k):
            n = k.item()
            return x[: sum([1, n, 2])].sum().reshape(1) + 1

        def false_fn(x, k):
            return x[:1].sum().reshape(1) - 1

        return torch.cond(x.sum() > 0, true_fn, false_fn, (x, k))


def _targets(gm):
    return [n.target for m in gm.modules() if isinstance(m, torch.fx.GraphModule)
            for n in m.graph.nodes if n.op == "call_function"]


def test_torch_cannot_save_it_as_traced():
    ep = torch.export.export(SumsInAnArm(), (torch.randn(8), torch.tensor(3)))
    assert torch.sym_sum in _targets(ep.graph_module)  # the premise
    with pytest.raises(Exception, match="sym_sum"):
        torch.export.save(ep, io.BytesIO())


def test_the_sum_as_additions_saves_and_computes_the_same():
    ep = torch.export.export(SumsInAnArm(), (torch.randn(8), torch.tensor(3)))
    assert serializable_sym_ops(ep.graph_module) == 1
    targets = _targets(ep.graph_module)
    assert torch.sym_sum not in targets and targets.count(operator.add) == 2
    buffer = io.BytesIO()
    torch.export.save(ep, buffer)
    buffer.seek(0)
    loaded = torch.export.load(buffer).module()
    for k in (0, 3, 5):
        x = torch.arange(8.0) + 1
        assert torch.equal(loaded(x, torch.tensor(k)), SumsInAnArm()(x, torch.tensor(k)))
    assert serializable_sym_ops(ep.graph_module) == 0  # nothing left to rewrite


class Windows(nn.Module):
    """A data-dependent branch whose arm sums sizes with Python's ``sum``."""

    def forward(self, x):
        if x.mean() > 0:
            keep = sum([x.shape[0], x.shape[1], -3])
            return x.flatten()[:keep].relu().sum(0, keepdim=True)
        return x[:1, 0] - 1


def test_a_stitched_program_holding_such_a_sum_saves_and_loads(tmp_path):
    def example(seed, sign, rows=8, cols=3):
        x = torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed)).abs()
        return (x * sign,)

    model = Windows()
    program = stitch.export(model, example(0, 1), examples=[(example(1, -1, 6, 4), {})])
    path = str(tmp_path / "windows.pt2")
    torch.export.save(program.exported_program, path)
    loaded = torch.export.load(path).module()
    graph = program.exported_program.module()
    for args in (example(2, 1, 5, 5), example(3, -1), example(4, 1, 9, 2)):
        for a, b in zip(pytree.tree_leaves(loaded(*args)), pytree.tree_leaves(graph(*args)),
                        strict=True):
            assert torch.equal(a, b)
        assert torch.equal(program(*args), model(*args))
