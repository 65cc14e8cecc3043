"""What stitch corrects in Inductor while it lowers (capture/tracing_fixes.py's
``lowering_fixes``, stitch/lower/sym_ops.py), each on its torch-only reproduction in
experiments/: torch alone fails there (if one stops failing, torch has fixed it and the fix
can go), and with the fix the build gives eager's values."""

from __future__ import annotations

import contextlib
import operator
import os
import sys

import pytest
import sympy
import torch
from torch import nn

import stitch
from capture.lowering_guards import undecided_sizes_answered
from capture.minmax_cases import decided_by_cases
from capture.nary_sym_ops import nary_sym_ops_lowered
from capture.reentrant import Reentrant
from capture.tracing_fixes import lowering_fixes
from stitch.lower.sym_ops import numel_as_sizes

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "experiments"))

import repro_bmm_unbacked  # noqa: E402
import repro_cond_numel_proxy  # noqa: E402
import repro_cond_operand_strides  # noqa: E402
import repro_nary_min  # noqa: E402


def _count_nodes(gm: torch.fx.GraphModule, target) -> int:
    return sum(n.target is target for m in gm.modules() if isinstance(m, torch.fx.GraphModule)
               for n in m.graph.nodes)


def _scores(seed: int) -> torch.Tensor:
    return torch.rand(3, 300, generator=torch.Generator().manual_seed(seed))


def _fixes(fixed: bool):
    """The lowering fixes or none, with Inductor's caches off: a graph compiled under the fixes
    is cached on disk under a key that does not know them, and torch alone would load it."""
    stack = contextlib.ExitStack()
    stack.enter_context(torch._inductor.config.patch(force_disable_caches=True))
    if fixed:
        stack.enter_context(lowering_fixes())
    return stack


def _inductor(module, fixed: bool):
    compiled = torch.compile(module, fullgraph=True, dynamic=False)

    def run(*args):
        with _fixes(fixed):
            return compiled(*args)
    return run


def test_the_nary_lowering_is_there_only_while_stitch_lowers():
    from torch._inductor.lowering import lowerings
    from torch.fx.experimental.proxy_tensor import _nary_sym_max, _nary_sym_min

    assert _nary_sym_min not in lowerings
    with nary_sym_ops_lowered():
        with nary_sym_ops_lowered():  # re-entrant: the inner exit keeps it
            pass
        assert _nary_sym_min in lowerings and _nary_sym_max in lowerings
    assert _nary_sym_min not in lowerings and _nary_sym_max not in lowerings


def test_a_patched_classmethod_is_put_back_as_one():
    class Owner:
        @classmethod
        def make(cls):
            return cls

    patch = Reentrant()
    with patch.active((Owner, "make", classmethod(lambda cls: "patched"))):
        assert Owner.make() == "patched"
    assert isinstance(vars(Owner)["make"], classmethod) and Owner.make() is Owner


def test_a_count_is_the_product_of_sizes():
    class Counts(nn.Module):
        def forward(self, x, y):
            return x.numel() * torch.ones(()) + y.sum() * y.numel()

    x, y = torch.randn(3, 5), torch.randn(2, 7)
    ep = torch.export.export(Counts(), (x, y), dynamic_shapes=({0: torch.export.Dim("n")},
                                                               None))
    assert _count_nodes(ep.graph_module, torch.ops.aten.sym_numel.default) == 1  # y's: static
    assert numel_as_sizes(ep.graph_module) == 1
    assert _count_nodes(ep.graph_module, torch.ops.aten.sym_numel.default) == 0
    assert _count_nodes(ep.graph_module, operator.mul) >= 1
    for rows in (3, 6):
        x = torch.randn(rows, 5)
        torch.testing.assert_close(ep.module()(x, y), Counts()(x, y))


def test_tests_that_hold_by_cases_of_their_max_are_decided():
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from torch.utils._sympy.functions import Max

    env = ShapeEnv()
    u, v = (env.create_unbacked_symint().node.expr for _ in range(2))
    assert decided_by_cases(env, sympy.Ge(16 * Max(1, u), u)) == sympy.true
    assert decided_by_cases(env, sympy.Lt(Max(1, u), u)) == sympy.false
    assert decided_by_cases(env, sympy.Eq(Max(1, u), 1)) is None  # true for u <= 1 only
    assert decided_by_cases(env, sympy.Ge(16 * Max(1, u), u + v)) is None


@pytest.mark.slow
@pytest.mark.parametrize("fixed", [False, True])
def test_inductor_lowers_a_count_of_unbacked_sizes_only_with_the_nary_lowering(fixed):
    s = _scores(0)
    run = _inductor(torch.export.export(repro_cond_numel_proxy.TopkPerLevel(), (s,)).module(),
                    fixed)
    if not fixed:
        with pytest.raises(Exception, match="_nary_sym_min.* is not an OpOverload"):
            run(s)
        return
    for seed in (0, 1):
        torch.testing.assert_close(run(_scores(seed)),
                                   repro_cond_numel_proxy.TopkPerLevel()(_scores(seed)))


@pytest.mark.slow
@pytest.mark.parametrize("counted", [False, True])
def test_aotinductor_lowers_an_arm_counting_elements_only_with_counts_as_sizes(counted, tmp_path):
    s = _scores(0)
    ep = torch.export.export(repro_cond_numel_proxy.TopkPerLevel(), (s,))
    if counted:
        assert numel_as_sizes(ep.graph_module) == 1  # the arm's numel() == 0
    with _fixes(True):
        if not counted:
            with pytest.raises(Exception, match="is not tracked with proxy"):
                torch._inductor.aoti_compile_and_package(ep, package_path=str(tmp_path / "a.pt2"))
            return
        path = torch._inductor.aoti_compile_and_package(ep, package_path=str(tmp_path / "a.pt2"))
    torch.testing.assert_close(torch._inductor.aoti_load_package(path)(s),
                               repro_cond_numel_proxy.TopkPerLevel()(s))


@pytest.mark.slow
@pytest.mark.parametrize("fixed", [False, True])
def test_inductor_lowers_a_bmm_over_an_unbacked_size_only_with_the_answers(fixed):
    x, n = torch.randn(4), torch.tensor(7)
    run = _inductor(torch.export.export(repro_bmm_unbacked.SlicedBmm(), (x, n)).module(), fixed)
    if not fixed:
        with pytest.raises(Exception, match="16\\*Max\\(1, u.*\\) >= u"):
            run(x, n)
        return
    for count in (7, 1, 0):
        n = torch.tensor(count)
        torch.testing.assert_close(run(x, n), repro_bmm_unbacked.SlicedBmm()(x, n))


def test_the_layout_answer_is_given_only_inside_the_layout_question():
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode, ShapeEnv

    env = ShapeEnv()
    u = env.create_unbacked_symint()
    with undecided_sizes_answered(), pytest.raises(GuardOnDataDependentSymNode):
        bool(u == 1)  # asked from here, not from Inductor's layout choice: torch's error


@pytest.mark.slow
@pytest.mark.parametrize("fixed", [False, True])
def test_inductor_gives_a_cond_operand_its_traced_strides_only_with_the_fix(fixed):
    model = repro_cond_operand_strides.TransposedScores()
    x = torch.randn(1, 16, 64, 65)
    run = _inductor(torch.export.export(model, (x,)).module(), fixed)
    if not fixed:
        with pytest.raises(Exception) as failed:
            run(x)
        cause = failed.value.__context__ or failed.value
        assert "stride 1040==65" in str(cause)
        return
    for sign in (1, -1):
        torch.testing.assert_close(run(sign * x.abs()), model(sign * x.abs()))


@pytest.mark.slow
def test_a_stitched_detection_tail_deploys_compiled():
    """Top-k per level, then torchvision's batched NMS, which stitch makes conds and a loop:
    both compilers build it and it passes every check (each example, each forced side)."""
    pytest.importorskip("torchvision")
    g = torch.Generator().manual_seed(0)
    model = repro_nary_min.TopkPerLevelNms()
    program = stitch.export(model, repro_nary_min.inputs(600, g),
                            examples=[(repro_nary_min.inputs(1500, g), {})])
    assert program.report.graph_ops.get("cond")
    for backend in ("inductor", "aoti"):
        deployed = stitch.compile(program, backend)
        assert deployed.decision.chosen == backend
        for n in (600, 1500):
            inputs = repro_nary_min.inputs(n, g)
            torch.testing.assert_close(deployed(*inputs), model(*inputs))
