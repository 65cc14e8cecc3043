"""In-graph checks keep the model's exact message through every backend.

Inductor's C++ backend pastes an ``_assert_async`` message into a string literal without
escaping it: a quote or newline in a message made the kernel fail to compile (Longformer's
guard reasons did). stitch encodes messages so every backend can embed them and decodes
them when the check fails."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import stitch
from stitch.finish import check_texts
from stitch.synthesize.operators.runtime import CHECK_PREFIX, encode_message, parse_check

AWKWARD = 'scale "too large"?\n  see [docs] \\ 100% — ünïcode'
NAN = "NaN in 'h'\tat \"layer\" ??= 1"


class Checked(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.lin(x)
        if torch.isnan(h).any():
            raise ValueError("NaN in 'h'\tat \"layer\" ??= 1")
        assert h.abs().max().item() < 100, 'scale "too large"?\n  see [docs] \\ 100% — ünïcode'
        return h.relu()


@given(st.text())
def test_any_message_round_trips_and_encodes_to_plain_ascii(message):
    encoded = encode_message(message)
    assert encoded.isascii() and not set(encoded) & set('"\\?]\n\r\t\0')
    text = f"RuntimeError: {CHECK_PREFIX}R1.S1:AssertionError:{encoded}] (from a kernel)"
    assert parse_check(text) == ("R1.S1", "AssertionError", message)


@pytest.fixture(scope="module")
def program():
    torch.manual_seed(0)
    return stitch.export(Checked().eval(), (torch.randn(2, 8),))


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["eager", "inductor", "aoti"])
def test_backend_raises_the_models_exact_message(program, backend):
    compiled = stitch.compile(program, backend)
    x = torch.randn(2, 8)
    torch.testing.assert_close(compiled(x), program(x))
    with pytest.raises(AssertionError) as got:
        compiled(torch.full((2, 8), 1e4))
    assert str(got.value) == AWKWARD
    with pytest.raises(ValueError) as got:
        compiled(torch.full((2, 8), float("nan")))
    assert str(got.value) == NAN


# CUDA refuses an ``_assert_async`` message of 255 bytes or more on every call, passing or
# not; a long message is carried by reference and kept with the program (its epilogue)
LONG = ("activations left the range this model was trained for; check the inputs, the "
        "normalisation and the learning-rate schedule, and try a smaller scale. " * 3).strip()


class LongChecked(torch.nn.Module):
    def forward(self, x):
        h = x * 2
        if h.sum() > 0:
            assert (h < 100).all(), LONG
            h = h + 1
        else:
            h = h - 1
        assert (h > -100).all(), LONG + " (below)"
        return h


@pytest.fixture(scope="module")
def long_program():
    return stitch.export(LongChecked(), (torch.rand(2, 3),), examples=[((-torch.rand(2, 3),), {})])


def _raises_the_long_messages(run):
    assert torch.equal(run(torch.ones(2, 3)), torch.full((2, 3), 3.0))
    with pytest.raises(AssertionError) as got:
        run(torch.full((2, 3), 60.0))  # in the taken arm
    assert str(got.value) == LONG
    with pytest.raises(AssertionError) as got:
        run(torch.full((2, 3), -60.0))  # at the top level, after the other arm
    assert str(got.value) == LONG + " (below)"


def test_a_long_message_is_carried_by_reference_and_raised_whole(long_program, monkeypatch):
    texts = check_texts(long_program.graph_module)
    assert len(texts) == 2 and all(len(t.encode()) < 255 for t in texts), texts
    assert len(long_program.epilogue.messages) == 2
    # as in a fresh process: nothing but what the program holds
    monkeypatch.setattr("stitch.synthesize.operators.rt_checks.LONG_MESSAGES", {})
    _raises_the_long_messages(long_program)


def test_a_long_message_travels_in_the_artifact(long_program, tmp_path, monkeypatch):
    path = stitch.compile(long_program, "onnxruntime").save(str(tmp_path / "long.onnx"))
    monkeypatch.setattr("stitch.synthesize.operators.rt_checks.LONG_MESSAGES", {})
    _raises_the_long_messages(stitch.load(path))


def test_a_reference_the_program_does_not_hold_says_so():
    text = f"{CHECK_PREFIX}S1:AssertionError:%@0123456789abcdef0123]"
    site, kind, message = parse_check(text, {})
    assert (site, kind) == ("S1", "AssertionError") and "not kept with this program" in message


@pytest.mark.gpu
def test_a_long_message_runs_on_cuda():
    """On CUDA a check whose text is 255 bytes or more fails every call, passing or not. A
    check that fails in the graph on CUDA is a device-side assert that ends the process's
    CUDA context (``Settings.checks``), so only the top-level check (the epilogue's there) is
    made to fail."""
    x = torch.rand(2, 3, device="cuda")
    program = stitch.export(LongChecked(), (x,), examples=[((-x,), {})])
    ones = torch.ones(2, 3, device="cuda")
    assert torch.equal(program(ones), ones * 3) and torch.equal(program(-ones), -ones * 3)
    with pytest.raises(AssertionError) as got:
        program(torch.full((2, 3), -60.0, device="cuda"))
    assert str(got.value) == LONG + " (below)"
