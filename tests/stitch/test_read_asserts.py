"""A value read from data only to be asserted on (``assert n.item() <= k``, no message):
torch.export traces it as written into a run-time check, so the model is exported as
written, before any census, and a failing check raises the model's AssertionError. The
models live in a module of their own: pytest rewrites the ``assert`` statements of test
modules, which torch.export then no longer sees as asserts."""

from __future__ import annotations

import pytest
import torch
from read_assert_models import (
    Asserts,
    AssertsInALoop,
    AssertsInAnotherObject,
    AssertsInHelper,
    AssertsWithMessage,
    Checks,
    ComputesWithRead,
)

import stitch
from stitch.plain_export import ASSERTED


def _export(model, width=None):
    """Two examples; ``width``: both of that width (the helper's mask has it), else two."""
    x, lengths = torch.randn(2, width or 8), torch.tensor([3, 5])
    other = torch.randn(3 if width else 2, width or 6), torch.tensor([1, 6] + ([2] if width else []))
    return stitch.export(model, (x, lengths), examples=[(other, {})])


def test_a_read_only_asserted_on_is_exported_as_written():
    program = _export(Asserts())
    assert program.report.strategies[0] == "as written: kept"
    assert any(n.startswith(ASSERTED) and "read_assert_models.py:11" in n
               for n in program.report.notes)
    x = torch.randn(2, 5)
    torch.testing.assert_close(program(x, torch.tensor([1, 2])), x * 2)


def test_asserts_in_a_helper_are_exported_as_written():
    program = _export(AssertsInHelper(), width=8)
    assert program.report.strategies[0] == "as written: kept"
    x, lengths = torch.randn(2, 8), torch.tensor([2, 7])
    torch.testing.assert_close(program(x, lengths), AssertsInHelper()(x, lengths))


@pytest.mark.parametrize("model", [Asserts(), AssertsInHelper()], ids=["forward", "helper"])
@pytest.mark.parametrize("lengths", [[1, 9], [-1, 2]], ids=["too-long", "negative"])
def test_its_failing_check_raises_the_models_assertion_error(model, lengths):
    program = _export(model, width=8)
    bad = (torch.randn(2, 8), torch.tensor(lengths))
    if lengths == [-1, 2] and isinstance(model, Asserts):
        torch.testing.assert_close(program(*bad), model(*bad))  # no assert on it there
        return
    with pytest.raises(AssertionError) as expected:
        model(*bad)
    with pytest.raises(AssertionError) as got:
        program(*bad)
    assert str(got.value) == str(expected.value)


@pytest.mark.parametrize("model", [AssertsWithMessage(), ComputesWithRead(), Checks()],
                         ids=["message", "computes", "torch-check"])
def test_other_reads_take_the_census(model):
    """torch.export traces an assert with a message as a guard (it fails as written), a read
    the forward computes with keeps Python's number rules through the rewrites, and
    ``torch._check`` raises RuntimeError, not AssertionError."""
    program = _export(model)
    assert not program.report.strategies[0].endswith(": kept")
    assert program.report.strategies[-1] == "converted: kept"
    bad = (torch.randn(2, 5), torch.tensor([1, 9]))
    raised = RuntimeError if isinstance(model, Checks) else AssertionError
    with pytest.raises(raised):
        model(*bad)
    with pytest.raises(raised):
        program(*bad)


@pytest.mark.parametrize("backend", ["eager", pytest.param("onnxruntime", marks=pytest.mark.slow),
                                     pytest.param("inductor", marks=pytest.mark.slow)])
def test_every_backend_keeps_the_check(backend):
    """The check is an ``_assert_async`` on a tensor, as a rewritten assert's: ONNX's
    exporter drops ``_assert_scalar``, and the program would stop checking there."""
    program = _export(AssertsInHelper(), width=8)
    compiled = stitch.compile(program, backend)
    x, lengths = torch.randn(2, 8), torch.tensor([2, 7])
    torch.testing.assert_close(compiled(x, lengths), program(x, lengths))
    for bad in ([1, 9], [-1, 2]):
        with pytest.raises(AssertionError):
            compiled(x, torch.tensor(bad))


@pytest.mark.parametrize("model", [AssertsInAnotherObject(), AssertsInALoop()],
                         ids=["another-object", "loop"])
def test_other_spellings_of_the_assert_are_exported_as_written(model):
    """Both examples of batch 2: a loop over a dimension the examples differ in is a size
    test of its own (test_loop_over_a_dimension.py)."""
    program = _export(model)
    assert program.report.strategies[0] == "as written: kept"
    x = torch.randn(2, 7)
    torch.testing.assert_close(program(x, torch.tensor([2, 7])), model(x, torch.tensor([2, 7])))
    with pytest.raises(AssertionError):
        program(x, torch.tensor([1, 9]))
