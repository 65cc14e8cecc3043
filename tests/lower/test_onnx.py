"""The ONNX Runtime backend: every exportable zoo case matches the model on every example and
on every branch side (forced in both graphs); refusals say what ONNX would lose."""

from __future__ import annotations

import dataclasses
import functools

import pytest
import torch
from conftest import zoo_program
from test_zoo_backends import matches_the_model

import stitch
from stitch.lower.backends import build
from tests.zoo import CASES, make

pytest.importorskip("onnxruntime", reason="the onnx extra is not installed")
pytest.importorskip("onnxscript", reason="the onnx extra is not installed")

UNFIXABLE = {"nonzero_gather", "calls_disabled"}
NAMES = sorted(n for n in CASES if n not in UNFIXABLE)


@functools.cache
def onnx_compiled(name: str):
    return stitch.compile(zoo_program(name), "onnxruntime")




def _conds(program) -> int:
    return sum(1 for m in program.exported_program.graph_module.modules()
               if isinstance(m, torch.fx.GraphModule) for n in m.graph.nodes
               if n.target is torch.ops.higher_order.cond)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_onnxruntime_matches_the_model_on_every_example_and_side(name, caplog):
    compiled = onnx_compiled(name)
    assert compiled.backend == "onnxruntime"
    sides = compiled._built.sides
    assert len(sides) == 2 * _conds(compiled.program)  # both sides of every cond, forced
    assert all(s.examples_run >= 1 and s.max_abs_error < 1e-4 for s in sides)
    matches_the_model(compiled, name, caplog)


@pytest.mark.slow
def test_a_failed_check_raises_the_models_exception():
    """ONNX has no assert: the check is an extra output and the runner raises it."""
    compiled = onnx_compiled("assert_finite")
    assert compiled._built.onnx_graph.checks  # lifted, not dropped
    model, args, _, _ = make("assert_finite")
    huge = (args[0] * 1e6,)
    with pytest.raises(AssertionError, match="activations overflowed"):
        model(*huge)
    with pytest.raises(AssertionError, match="activations overflowed"):
        compiled(*huge)


@pytest.mark.slow
def test_buffer_updates_are_carried_as_state():
    """ONNX export drops copy_ into buffers: they are inputs/outputs the runner carries."""
    compiled = stitch.compile(zoo_program("buffer_in_branch"), "onnxruntime")  # fresh state
    assert compiled._built.onnx_graph.state  # not dropped
    model, args, kwargs, examples = make("buffer_in_branch")
    for a, k in [(args, kwargs), (args, kwargs), *examples, (args, kwargs)]:
        with torch.no_grad():  # the state advances in both, call after call
            torch.testing.assert_close(compiled(*a, **k), model(*a, **k))
    carried = compiled._built.run.state  # buffer name -> its value now
    assert carried
    for name, value in carried.items():
        want = dict(model.named_buffers())[name.removeprefix("model.")]
        torch.testing.assert_close(value.cpu(), want)


@pytest.mark.slow
def test_in_place_writes_other_than_copy_are_refused():
    from stitch.lower.onnx_state import lift_buffer_updates

    class Counter(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("n", torch.zeros(()))

        def forward(self, x):
            self.n.add_(1)
            return x + self.n

    ep = torch.export.export(Counter(), (torch.ones(2),))
    import copy

    gm = copy.deepcopy(ep.graph_module)
    written = [n for n in gm.graph.nodes if "add_" in str(n.target)]
    if not written:
        pytest.skip("torch.export functionalised the add_ (no in-place write left)")
    with pytest.raises(Exception, match="written in place"):
        lift_buffer_updates(gm, ep.graph_signature)


class OneSideSeen(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.proj(x)
        if h.sum() > -1e9:  # every example takes this side
            h = torch.sin(self.proj(h))  # a module call: a cond, not a where
        else:
            h = torch.cos(self.proj(h))
        return h


@pytest.mark.slow
def test_a_wrong_side_no_example_takes_is_caught():
    """Damage the ONNX else-branch (cos -> sin): the examples never take it, the forced
    check does, and says which side differs."""
    import onnx

    from stitch.lower.onnx_forced import WrongSide, check_every_side, onnx_ifs
    from stitch.lower.onnx_runtime import OnnxRunner

    torch.manual_seed(0)
    x = torch.randn(2, 8)
    program = stitch.export(OneSideSeen().eval(), (x,), examples=[((x + 1,), {})])
    built = build("onnxruntime", program, program.example)
    assert [s.name for s in built.sides] == ["cond 0 true", "cond 0 false"]
    proto = onnx.load_from_string(built.onnx_graph.model)
    else_branch = next(a.g for a in onnx_ifs(proto.graph)[(0,)].attribute
                       if a.name == "else_branch")
    cos = next(n for n in else_branch.node if n.op_type == "Cos")
    cos.op_type = "Sin"
    damaged = dataclasses.replace(built.onnx_graph, model=proto.SerializeToString())
    on_examples = OnnxRunner(damaged)
    for ex in program.examples:  # the examples alone would not notice
        torch.testing.assert_close(on_examples(*ex.args)[0], program.module()(*ex.args)[0])

    def reference(module, ex):
        return module(*ex.args, **ex.kwargs)

    def runner(model):
        run = OnnxRunner(damaged, model)
        return lambda ex: run(*ex.args, **ex.kwargs)

    with pytest.raises(WrongSide, match="cond 0 false forced"):
        check_every_side(program, damaged, program.examples, reference, runner)


@pytest.mark.slow
def test_auto_has_an_onnxruntime_candidate():
    compiled = stitch.compile(zoo_program("branch_on_tensor"), "auto", repeats=3)
    onnx = next(c for c in compiled.decision.candidates if c.backend == "onnxruntime")
    assert onnx.available and onnx.correct and onnx.median_ms is not None
    assert onnx.checked == "2 branch side(s) checked forced against the graph"


class CheckInBranch(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.proj(x)
        if h.mean() > 0:
            assert h.abs().max() < 100, "too large on the positive side"
            h = torch.tanh(self.proj(h))  # tanh: well conditioned at the huge test inputs
        else:
            h = -torch.tanh(self.proj(h))
        return h


@pytest.mark.slow
def test_a_check_inside_a_branch_is_lifted_out_of_the_if():
    torch.manual_seed(0)
    model = CheckInBranch().eval()
    x = torch.randn(2, 8)
    pos = next(s * x for s in (1.0, -1.0) if model.proj(s * x).mean() > 0)
    program = stitch.export(model, (pos,), examples=[((-pos,), {})])
    compiled = stitch.compile(program, "onnxruntime")
    assert len(compiled._built.onnx_graph.checks) == 1  # lifted out of the If, not dropped
    raised = 0
    for big in (pos * 1e4, -pos * 1e4):  # the check's side fails; the other side runs
        with torch.no_grad():
            try:
                want = model(big)
            except AssertionError as e:
                assert "too large on the positive side" in str(e)
                with pytest.raises(AssertionError, match="too large on the positive side"):
                    compiled(big)
                raised += 1
                continue
            torch.testing.assert_close(compiled(big), want)
    assert raised == 1
