"""Unused scalar reads of constants that torch.export leaves behind are removed, and only
those: a read of an input, or one whose value the graph uses, stays."""

from __future__ import annotations

import torch

import stitch
from stitch.lower.dead_reads import drop_dead_constant_reads


class ChunkView(torch.nn.Module):
    """Longformer's pattern: a size computed through a tensor (``torch.div`` on ints)."""

    def forward(self, x):
        chunks = torch.div(x.shape[1], 4, rounding_mode="trunc")
        return (x.view(x.shape[0], chunks, 4) * 2).sum(-1)


def _targets(gm: torch.fx.GraphModule) -> list[str]:
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


def test_export_leaves_a_dead_read_and_the_pass_removes_it():
    x = torch.randn(2, 16)
    ep = torch.export.export(ChunkView(), (x,))
    assert "aten.item.default" in _targets(ep.graph_module)  # what the pass exists for
    assert drop_dead_constant_reads(ep.graph_module) == 1
    targets = _targets(ep.graph_module)
    assert "aten.item.default" not in targets and "aten.div.Tensor_mode" not in targets
    torch.testing.assert_close(ep.module()(x), ChunkView()(x))


def test_stitch_export_records_the_removal_and_the_graph_compiles_whole():
    x = torch.randn(2, 16)
    program = stitch.export(ChunkView(), (x,))
    assert any("removed 1 unused scalar read" in n for n in program.report.notes)
    assert "aten.item.default" not in _targets(program.exported_program.graph_module)
    compiled = torch.compile(program.module(), fullgraph=True)
    torch.testing.assert_close(compiled(x)[0], ChunkView()(x))


def _graph(build) -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    out = build(graph)
    graph.output(out)
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def test_reads_of_inputs_and_used_reads_stay():
    aten = torch.ops.aten

    def of_input(g):
        x = g.placeholder("x")
        g.call_function(aten.item.default, (g.call_function(aten.sum.default, (x,)),))
        return x

    def used(g):
        x = g.placeholder("x")
        four = g.call_function(aten.div.Tensor_mode, (16, 4), {"rounding_mode": "trunc"})
        n = g.call_function(aten.item.default, (four,))
        return g.call_function(aten.mul.Tensor, (x, n))

    def random(g):
        x = g.placeholder("x")
        r = g.call_function(aten.rand.default, ([1],))
        g.call_function(aten.item.default, (r,))
        return x

    for build in (of_input, used, random):
        gm = _graph(build)
        before = _targets(gm)
        assert drop_dead_constant_reads(gm) == 0, build.__name__
        assert _targets(gm) == before
