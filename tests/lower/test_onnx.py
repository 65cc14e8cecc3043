"""The ONNX Runtime backend: every exportable zoo case matches the model on every example and
on every branch side (forced in both graphs); refusals say what ONNX would lose."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import logging

import pytest
import torch
from conftest import zoo_program

import stitch
from stitch.lower.backends import build
from stitch.zoo import CASES, make

pytest.importorskip("onnxruntime", reason="the onnx extra is not installed")
pytest.importorskip("onnxscript", reason="the onnx extra is not installed")

UNFIXABLE = {"nonzero_gather", "calls_disabled"}
REFUSED = {"buffer_in_branch"}  # ONNX export drops buffer updates
NAMES = sorted(n for n in CASES if n not in UNFIXABLE | REFUSED)


@functools.cache
def onnx_compiled(name: str):
    return stitch.compile(zoo_program(name), "onnxruntime")


def _run(fn, a, k, caplog):
    out = io.StringIO()
    caplog.clear()
    with contextlib.redirect_stdout(out), torch.no_grad(), \
            caplog.at_level(logging.INFO, logger="stitch.zoo"):
        try:
            result = fn(*a, **k)
        except Exception as e:  # noqa: BLE001 - the same exception is expected of both
            result = (type(e), str(e))
    return result, out.getvalue(), [r.getMessage() for r in caplog.records]


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
    model, args, kwargs, examples = make(name)
    for a, k in [(args, kwargs), *examples]:
        got, got_out, got_logs = _run(compiled, a, k, caplog)
        want, want_out, want_logs = _run(model, a, k, caplog)
        if isinstance(want, tuple) and isinstance(want[0], type):
            assert got == want
        else:
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
        assert (got_out, got_logs) == (want_out, want_logs)


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
def test_buffer_updates_are_refused_not_dropped():
    from stitch.lower.onnx_export import OnnxRefused

    program = zoo_program("buffer_in_branch")
    with pytest.raises(OnnxRefused, match="updates buffers"):
        build("onnxruntime", program, program.example)


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
