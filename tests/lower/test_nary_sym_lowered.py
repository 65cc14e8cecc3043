"""Graphs whose cond tests a count of unbacked sizes (torchvision's detection post-processing:
per-level top-k of ``min(k, n)`` boxes, concatenated, then batched NMS's ``numel()`` tests)
lower with Inductor and AOTInductor: torch's n-ary ``Min`` gets a lowering while stitch lowers
(capture/nary_sym_ops.py) and an element count is written as the product of sizes
(stitch/lower/sym_ops.py)."""

from __future__ import annotations

import contextlib
import operator

import pytest
import torch
from torch import nn

import stitch
from capture.nary_sym_ops import nary_sym_ops_lowered
from capture.tracing_fixes import lowering_fixes
from stitch.lower.sym_ops import numel_as_sizes


def _empty_or_doubled(c):
    return torch.cond(torch.full((), c.numel() == 0), lambda c: c.new_zeros(c.shape),
                      lambda c: c * 2, (c,))


class TopkPerLevel(nn.Module):
    """Per level the top ``min(100, n)`` scores over 0.5, each as a box of 4; a cond on the
    boxes' count, a cond on ``numel() == 0`` inside its arm."""

    def forward(self, s):
        boxes = []
        for level in range(3):
            keep = (s[level] > 0.5).nonzero()[:, 0]
            top = s[level][keep].topk(min(100, keep.shape[0])).values
            boxes.append(top[:, None].expand(-1, 4) * 1)
        boxes = torch.cat(boxes)
        return torch.cond(torch.full((), boxes.numel() > 800), _empty_or_doubled,
                          lambda c: c - 1, (boxes,))


def _scores(n: int, seed: int) -> torch.Tensor:
    return torch.rand(3, n, generator=torch.Generator().manual_seed(seed))


def _count_nodes(gm: torch.fx.GraphModule, target) -> int:
    return sum(n.target is target for m in gm.modules() if isinstance(m, torch.fx.GraphModule)
               for n in m.graph.nodes)


def test_the_lowering_is_there_only_while_stitch_lowers():
    from torch._inductor.lowering import lowerings
    from torch.fx.experimental.proxy_tensor import _nary_sym_max, _nary_sym_min

    assert _nary_sym_min not in lowerings
    with nary_sym_ops_lowered():
        with nary_sym_ops_lowered():  # re-entrant: the inner exit keeps it
            pass
        assert _nary_sym_min in lowerings and _nary_sym_max in lowerings
    assert _nary_sym_min not in lowerings and _nary_sym_max not in lowerings


def test_a_count_is_the_product_of_sizes():
    class Counts(nn.Module):
        def forward(self, x, y):
            return x.numel() * torch.ones(()) + y.sum() * y.numel()

    x, y = torch.randn(3, 5), torch.randn(2, 7)
    ep = torch.export.export(Counts(), (x, y), dynamic_shapes=(
        {0: torch.export.Dim("n")}, None))
    assert _count_nodes(ep.graph_module, torch.ops.aten.sym_numel.default) == 1  # y's: static
    assert numel_as_sizes(ep.graph_module) == 1
    assert _count_nodes(ep.graph_module, torch.ops.aten.sym_numel.default) == 0
    assert _count_nodes(ep.graph_module, operator.mul) >= 1
    for rows in (3, 6):
        x = torch.randn(rows, 5)
        torch.testing.assert_close(ep.module()(x, y), Counts()(x, y))


@pytest.mark.slow
@pytest.mark.parametrize("fixed", [False, True])
def test_inductor_lowers_the_graph_only_with_the_lowering(fixed):
    """Without it, torch alone fails; if that stops failing, torch lowers such graphs itself
    and nary_sym_ops can go."""
    s = _scores(300, 0)
    module = torch.export.export(TopkPerLevel(), (s,)).module()
    with lowering_fixes() if fixed else contextlib.nullcontext():
        compiled = torch.compile(module, fullgraph=True, dynamic=False)
        if not fixed:
            with pytest.raises(Exception, match="_nary_sym_min.* is not an OpOverload"):
                compiled(s)
            return
        for n, seed in ((300, 0), (300, 1)):
            s = _scores(n, seed)
            torch.testing.assert_close(compiled(s), TopkPerLevel()(s))


@pytest.mark.slow
@pytest.mark.parametrize("counted", [False, True])
def test_aotinductor_lowers_the_graph_only_with_counts_as_sizes(counted, tmp_path):
    s = _scores(300, 0)
    ep = torch.export.export(TopkPerLevel(), (s,))
    if counted:
        assert numel_as_sizes(ep.graph_module) == 1  # the arm's numel() == 0
    with lowering_fixes():
        if not counted:
            with pytest.raises(Exception, match="is not tracked with proxy"):
                torch._inductor.aoti_compile_and_package(ep, package_path=str(tmp_path / "a.pt2"))
            return
        path = torch._inductor.aoti_compile_and_package(ep, package_path=str(tmp_path / "a.pt2"))
    run = torch._inductor.aoti_load_package(path)
    torch.testing.assert_close(run(s), TopkPerLevel()(s))


@pytest.mark.slow
def test_a_stitched_detection_tail_deploys_compiled():
    """Top-k per level, then torchvision's batched NMS, which stitch makes conds and a loop:
    both compilers build it and it passes every check (each example, each forced side)."""
    torchvision = pytest.importorskip("torchvision")

    class TopkNms(nn.Module):
        def forward(self, scores, boxes):
            kept, top_scores, levels = [], [], []
            for level in range(scores.shape[0]):
                keep = (scores[level] > 0.5).nonzero()[:, 0]
                top, at = scores[level][keep].topk(min(1000, keep.shape[0]))
                kept.append(boxes[level][keep[at]])
                top_scores.append(top)
                levels.append(torch.full_like(at, level))
            b, s, i = torch.cat(kept), torch.cat(top_scores), torch.cat(levels)
            keep = torchvision.ops.batched_nms(b, s, i, 0.5)
            return b[keep], s[keep]

    def inputs(n, seed):
        g = torch.Generator().manual_seed(seed)
        xy = torch.rand(3, n, 2, generator=g) * 100
        wh = 5 + torch.rand(3, n, 2, generator=g) * 20
        return torch.rand(3, n, generator=g), torch.cat([xy, xy + wh], -1)

    program = stitch.export(TopkNms(), inputs(600, 0), examples=[(inputs(1500, 1), {})])
    assert program.report.graph_ops.get("cond")
    for backend in ("inductor", "aoti"):
        deployed = stitch.compile(program, backend)
        assert deployed.decision.chosen == backend
        for n, seed in ((600, 2), (1500, 3)):
            torch.testing.assert_close(deployed(*inputs(n, seed)), TopkNms()(*inputs(n, seed)))
