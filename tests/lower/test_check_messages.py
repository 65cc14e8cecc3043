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
