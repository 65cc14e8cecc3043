"""A lowered build that differs from the stitched graph beyond assert_close's float32
tolerance is deployed only where it is as accurate as eager against the graph run in
float64 (``stitch/lower/float64.py``); anything less accurate, and anything where float64
is no yardstick, is refused as before."""

from __future__ import annotations

import pytest
import torch
import torch.utils._pytree as pytree

import stitch
from stitch.deploy.profile import select
from stitch.lower.backends import Built
from stitch.lower.float64 import as_accurate, float64_module


class Wide(torch.nn.Module):
    """Long float32 sums of large values: eager lands well past assert_close's atol from
    the exact result, as a deep model's logits do."""

    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.w = torch.nn.Parameter(torch.randn(4096, 64, generator=g) * 30)

    def forward(self, x):
        y = x @ self.w
        if y.sum() > 0:
            y = y + 1
        return y * 3.0


class Drawing(torch.nn.Module):
    def forward(self, x):
        return x + torch.randn(x.shape, dtype=x.dtype)


def _program(model, x):
    torch.manual_seed(0)
    return stitch.export(model, (x,), examples=[((x.flip(0),), {})])


def _candidate(run_of):
    def builder(backend, program, example):
        return Built(backend, run_of(program), 0.0)
    return builder


def _in_float64(program):
    """A build more accurate than eager: the graph computed in float64, rounded once."""
    wide = float64_module(program.exported_program.module())

    def run(x):
        return pytree.tree_map(lambda t: t.float(), wide(x.double()))
    return run


def _noisy(program):
    """A build off by one part in a thousand of the output's scale."""
    module = program.exported_program.module()

    def run(x):
        return pytree.tree_map(lambda y: y + 1e-3 * y.abs().mean(), module(x))
    return run


def _reasons(decision):
    return {c.name: (c.reason, c.checked) for c in decision.candidates}


def test_a_build_more_accurate_than_eager_is_kept_and_says_why():
    x = torch.randn(3, 4096) * 30
    program = _program(Wide(), x)
    (exact,) = pytree.tree_leaves(_in_float64(program)(x))
    (eager,) = pytree.tree_leaves(program.exported_program.module()(x))
    try:  # the premise: assert_close alone refuses it
        torch.testing.assert_close(exact, eager)
        raise AssertionError("assert_close accepts the float64 build: no premise")
    except AssertionError as e:
        assert "not close" in str(e)
    _, decision = select(program, ["inductor"], program.examples, repeats=3,
                         builders={"inductor": _candidate(_in_float64)})
    reason, checked = _reasons(decision)["inductor"]
    assert "wrong" not in reason, reason
    assert "as accurate as eager against the graph run in float64" in checked, checked


def test_a_less_accurate_build_is_refused_with_the_numbers():
    x = torch.randn(3, 4096) * 30
    program = _program(Wide(), x)
    _, decision = select(program, ["inductor"], program.examples, repeats=3,
                         builders={"inductor": _candidate(_noisy)})
    reason, _ = _reasons(decision)["inductor"]
    assert reason.startswith("wrong results"), reason
    assert "Against the graph run in float64" in reason and "not as accurate" in reason


def test_float64_is_no_yardstick_where_the_graph_draws_random_numbers():
    x = torch.randn(4, 16)  # from 16 elements float32 and float64 draws differ (torch 2.14)
    program = _program(Drawing(), x)
    module = program.exported_program.module()
    torch.manual_seed(1)
    (eager,) = pytree.tree_leaves(module(x))
    torch.manual_seed(1)
    (exact,) = pytree.tree_leaves(float64_module(module)(x.double()))
    ok, numbers = as_accurate(eager, eager + 1e-3, exact)
    assert not ok and "no yardstick" in numbers


def test_the_float64_copy_widens_dtypes_named_in_the_graph_and_in_cond_bodies():
    class Named(torch.nn.Module):
        def forward(self, x):
            y = torch.full((2,), 0.1, dtype=torch.float32) + x.to(torch.float32)
            if y.sum() > 0:
                y = y + torch.ones(2, dtype=torch.float32) / 3
            return y
    x = torch.rand(2)
    program = _program(Named(), x)
    wide = float64_module(program.exported_program.module())
    (out,) = pytree.tree_leaves(wide(x.double()))
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, x.double() + 0.1 + 1 / 3, rtol=0, atol=1e-15)


class ReadsBits(torch.nn.Module):
    """Reads its input's bits as int32: in float64 there are twice as many, and the float64
    graph raises."""

    def forward(self, x):
        y = x + (x.view(torch.int32) & 1).to(x.dtype)
        if y.sum() > 0:
            y = y + 1
        return y


def test_a_refusal_says_why_the_float64_graph_gave_no_yardstick():
    x = torch.randn(3, 8)
    program = _program(ReadsBits(), x)
    _, decision = select(program, ["inductor"], program.examples, repeats=3,
                         builders={"inductor": _candidate(_noisy)})
    reason, _ = _reasons(decision)["inductor"]
    assert reason.startswith("wrong results"), reason
    assert "No yardstick in float64: the graph run in float64 raised RuntimeError" in reason


def test_the_float64_copy_makes_tensors_of_no_named_dtype_in_float64():
    """``arange(n) * 0.5`` takes the default dtype, and the graph then asserts the dtype its
    ``.to`` names (widened): run in float32, that assertion failed and there was no yardstick
    (SSD300's anchor grid)."""
    from types import SimpleNamespace

    from stitch.lower.float64 import _run

    class Grid(torch.nn.Module):
        def forward(self, x):
            return x + (torch.arange(x.shape[0]) * 0.5).to(torch.float32)

    x = torch.randn(4)
    wide = float64_module(torch.export.export(Grid(), (x,)).module())
    out = _run(wide, SimpleNamespace(args=(x,), kwargs={}))
    assert out is not None and out.dtype == torch.float64
    torch.testing.assert_close(out, x.double() + torch.arange(4, dtype=torch.float64) * 0.5)
    assert torch.get_default_dtype() == torch.float32  # put back


def test_onnx_runtime_is_held_to_the_same_rule_on_every_forced_branch_side():
    """ONNX Runtime sums the long products in another order: beyond assert_close on both
    sides of the cond, as accurate as eager on each."""
    pytest.importorskip("onnxruntime")
    from stitch.lower import build

    x = torch.randn(3, 4096) * 30
    program = _program(Wide(), x)
    built = build("onnxruntime", program, program.examples[0])
    (got,) = pytree.tree_leaves(built.run(x))
    (eager,) = pytree.tree_leaves(program.exported_program.module()(x))
    assert not torch.allclose(got, eager, rtol=1.3e-6, atol=1e-5)  # the premise
    assert built.note == "2 branch side(s) checked forced against the graph"


def test_no_float64_copy_where_it_would_not_fit_in_memory(monkeypatch):
    """A large model's float64 copy could exhaust the memory its weights live in: where it
    would take more than half of what is free, there is no yardstick, and assert_close
    decides alone."""
    import stitch.lower.float64 as f64

    x = torch.randn(3, 4096) * 30
    program = _program(Wide(), x)
    free = {"SC_AVPHYS_PAGES": 16, "SC_PAGE_SIZE": 4096}  # 64 KiB free; the weights are 1 MiB
    monkeypatch.setattr(f64.os, "sysconf", lambda name: free[name])
    _, decision = select(program, ["inductor"], program.examples, repeats=3,
                         builders={"inductor": _candidate(_in_float64)})
    reason, _ = _reasons(decision)["inductor"]
    assert reason.startswith("wrong results"), reason
