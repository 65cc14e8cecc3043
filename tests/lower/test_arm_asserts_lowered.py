"""A cond whose arm asserts something about the size its test reads (a reshape by a count
known only at run time), lowered by Inductor and by AOTInductor. Both trace the arms again
(functionalization's alias check and schema), and an assertion hoisted out of its arm
failed every input that takes the other side: Inductor's program raised
``Ne(Min(3, u0), 0)``, AOTInductor's ``Expected Ne(Min(3, u0), 0) but received 0``, on the
input that keeps no row (capture/branch_asserts.py reads those tracers' arms too)."""

from __future__ import annotations

import functools

import pytest
import torch
from kept_rows import SplitsByKeptCounts, some_and_none
from torch.torch_version import TorchVersion

import stitch


@functools.cache
def _program():
    model = SplitsByKeptCounts()
    x, none_kept = some_and_none(model.lin)
    return model, (x, none_kept), stitch.export(model, (x,), examples=[((none_kept,), {})])


@pytest.mark.parametrize("backend", ["inductor", "aoti"])
def test_an_arm_assertion_stays_in_its_arm_when_lowered(backend):
    model, inputs, program = _program()
    compiled = stitch.compile(program, backend)  # verified on both inputs, or refused
    assert compiled.decision.chosen == backend
    for v in (*inputs, -inputs[0]):
        with torch.no_grad():
            got, want = compiled(v), model(v)
        assert got.shape == want.shape and torch.equal(got, want)
    with torch.no_grad():
        assert model(inputs[1]).shape[0] == 0 and model(inputs[0]).shape[0] > 0


class RegroupsInAMethod(SplitsByKeptCounts):
    """The same size test written otherwise: ``numel() != 0`` in a method of the module."""

    def regroup(self, rows):
        if rows.numel() != 0:
            return rows.reshape(rows.shape[0], -1, 3)
        return rows

    def forward(self, x):
        h = self.lin(x)
        rows = h[(h[:, 0] > 0).nonzero()[:, 0]][:3]
        return self.regroup(rows).reshape(rows.shape[0], 6) * 2  # split after the call


def test_a_size_test_written_otherwise_stays_in_its_arm_under_aoti():
    model = RegroupsInAMethod()
    x, none_kept = some_and_none(model.lin)
    program = stitch.export(model, (x,), examples=[((none_kept,), {})])
    compiled = stitch.compile(program, "aoti")
    for v in (x, none_kept):
        with torch.no_grad():
            assert torch.equal(compiled(v), model(v))


@pytest.mark.gpu
@pytest.mark.skipif(TorchVersion(torch.__version__) < (2, 14), reason=(
    "torch < 2.14 cannot export this model (2.11's Dynamo breaks on its nonzero() and its "
    "export cannot guard u1 > 0; seen on a lent GPU, gpu.md seventh run); the pin is 2.14.1"))
@pytest.mark.parametrize("backend", ["inductor", "aoti"])
def test_an_arm_assertion_stays_in_its_arm_on_cuda(backend):
    """The same program exported from the model on CUDA and lowered there (Triton kernels,
    the AOTInductor package loaded on the device), checked on both sides."""
    model = SplitsByKeptCounts().cuda()
    x, none_kept = (t.cuda() for t in some_and_none(model.lin.cpu()))
    model.cuda()
    program = stitch.export(model, (x,), examples=[((none_kept,), {})])
    compiled = stitch.compile(program, backend)
    assert compiled.decision.chosen == backend
    for v in (x, none_kept, -x):
        with torch.no_grad():
            got, want = compiled(v), model(v)
        assert got.is_cuda and got.shape == want.shape
        torch.testing.assert_close(got, want)
