"""Scalar constants inside cond branches (``x[idx] = -1e4``) become ``aten.full`` ops:
torch.export leaves them as ``get_attr`` in the branch subgraph, which AOTInductor and
``torch.export.save`` refuse."""

from __future__ import annotations

import pytest
import torch

from stitch.lower.branch_constants import inline_branch_constants


class MaskedFillInBranch(torch.nn.Module):
    def forward(self, x):
        def masked(x):
            y = x.clone()
            y[x < 0] = -1e4  # a 0-d constant tensor in the branch's subgraph
            return (y * 2,)

        def plain(x):
            return (x - 1,)

        return torch.cond(x.sum() > 0, masked, plain, (x,))[0]


def _constants(gm: torch.fx.GraphModule) -> list[str]:
    return [n.target for m in gm.modules() if isinstance(m, torch.fx.GraphModule)
            for n in m.graph.nodes if n.op == "get_attr"
            and isinstance(getattr(m, n.target), torch.Tensor)]


@pytest.fixture(scope="module")
def exported():
    x = torch.tensor([[1.0, -2.0, 3.0]])
    return torch.export.export(MaskedFillInBranch(), (x,), strict=False), x


def test_constants_in_branches_become_full_ops_and_values_stay(exported, tmp_path):
    ep, x = exported
    assert _constants(ep.graph_module), "torch no longer leaves them: the pass may be dropped"
    with pytest.raises(Exception, match="getattr nodes containing tensors"):
        torch.export.save(ep, str(tmp_path / "before.pt2"))
    model = MaskedFillInBranch()
    before = [ep.module()(v) for v in (x, -x)]
    assert inline_branch_constants(ep.graph_module) == 1
    assert _constants(ep.graph_module) == []
    for v, want in zip((x, -x), before, strict=True):
        torch.testing.assert_close(ep.module()(v), want)
        torch.testing.assert_close(ep.module()(v), model(v))
    torch.export.save(ep, str(tmp_path / "after.pt2"))  # refused before the pass
    assert inline_branch_constants(ep.graph_module) == 0  # nothing left to do


@pytest.mark.slow
def test_the_branch_lowers_to_aoti(exported, tmp_path):
    ep, x = exported
    inline_branch_constants(ep.graph_module)
    path = torch._inductor.aoti_compile_and_package(ep, package_path=str(tmp_path / "m.pt2"))
    run = torch._inductor.aoti_load_package(path)
    for v in (x, -x):
        torch.testing.assert_close(run(v), MaskedFillInBranch()(v))
