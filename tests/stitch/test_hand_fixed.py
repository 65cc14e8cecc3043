"""The hand-fixed zoo versions the benchmark compares against compute what the models do
(outputs, printed and logged text, buffers): otherwise the comparison would mean nothing."""

from __future__ import annotations

import contextlib
import io
import logging

import pytest
import torch

from tests.zoo import make
from tests.zoo.hand_fixed import FIXED, hand_fixed


@pytest.mark.parametrize("name", sorted(FIXED))
def test_hand_fixed_matches_the_model(name, caplog):
    program = hand_fixed(name)
    model, args, kwargs, examples = make(name)
    for a, k in [(args, kwargs), *examples]:
        texts = []
        for fn in (program, model):
            out = io.StringIO()
            caplog.clear()
            with contextlib.redirect_stdout(out), torch.no_grad(), \
                    caplog.at_level(logging.WARNING, logger="tests.zoo"):
                result = fn(*a, **k)
            texts.append((out.getvalue(), [r.getMessage() for r in caplog.records]))
            if fn is program:
                got = result
        torch.testing.assert_close(got, result)
        assert texts[0] == texts[1]
    for (key, value), (key2, value2) in zip(program._module.named_buffers(),
                                            model.named_buffers(), strict=True):
        assert key.removeprefix("m.") == key2 and torch.equal(value, value2)
