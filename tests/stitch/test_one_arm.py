"""A size test whose untaken arm serves both sides (stitch/size_rewrite.py,
synthesize/convert/one_arm.py).

Longformer pads its input to a multiple of its window under ``if padding_len > 0:`` and then
asserts the padded length is whole windows. A cond on the size gives the padded length as
the cond's output, whose divisibility later ops cannot see: that program accepts no size the
guarded one refused. The padding arm alone, run at every size, pads by zero where the model
does not pad; stitch keeps it only where verification finds it exact on both sides, and
what the arm logs stays under the test."""

from __future__ import annotations

import logging

import pytest
import torch
import torch.nn.functional as F

import stitch
from stitch.plan import Action
from stitch.synthesize.operators.runtime import general_side

WINDOW = 4
logger = logging.getLogger("tests.one_arm")


def _windows(x, length):
    """Longformer's step after its padding test: whole windows asserted, then viewed."""
    assert x.shape[1] % WINDOW == 0, "whole windows"
    chunks = x.view(x.shape[0], x.shape[1] // WINDOW, WINDOW, x.shape[2])
    return chunks.softmax(2).reshape(x.shape[0], -1, x.shape[2])[:, :length]


class PadsToWholeWindows(torch.nn.Module):
    def forward(self, x):
        length = x.shape[1]
        pad = (WINDOW - length % WINDOW) % WINDOW
        if pad > 0:  # neither example pads
            logger.warning("padded by %d", pad)
            x = F.pad(x, (0, 0, 0, pad))
        return _windows(x, length)


class ScalesWherePadded(PadsToWholeWindows):
    def forward(self, x):
        length = x.shape[1]
        pad = (WINDOW - length % WINDOW) % WINDOW
        if pad > 0:  # the arm is not right where the model does not pad: never kept
            x = F.pad(x, (0, 0, 0, pad)) * 2
        return _windows(x, length)


class PadsInAnExpression(PadsToWholeWindows):
    def forward(self, x):
        length = x.shape[1]
        pad = (WINDOW - length % WINDOW) % WINDOW
        x = F.pad(x, (0, 0, 0, pad)) if pad > 0 else x  # the same test, as a value
        return _windows(x, length)


class Padder(torch.nn.Module):
    def whole_windows(self, x):  # the test in another module's helper method
        pad = (WINDOW - x.shape[1] % WINDOW) % WINDOW
        if pad > 0:
            x = F.pad(x, (0, 0, 0, pad))
        return x


class PadsInAnotherModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.padder = Padder()

    def forward(self, x):
        return _windows(self.padder.whole_windows(x), x.shape[1])


def _export(model):
    return stitch.export(model, (torch.randn(2, 16, 3),),
                         examples=[((torch.randn(2, 24, 3),), {})])


def _logged(fn, x) -> list[str]:
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    handler = Keep()
    logger.addHandler(handler)
    try:
        out = fn(x)
    finally:
        logger.removeHandler(handler)
    return out, records


def test_the_padding_arm_serves_every_length_where_the_cond_keeps_none():
    model = PadsToWholeWindows()
    program = _export(model)
    test_line = next((d for d in program.report.decisions if d.action == Action.ONE_ARM), None)
    assert test_line is not None, program.report.notes
    assert test_line.location.endswith(f":{PadsToWholeWindows.forward.__code__.co_firstlineno + 3}")
    for length in (5, 9, 13, 16, 21, 30):  # lengths no example had, both sides
        x = torch.randn(2, length, 3)
        got, said = _logged(program, x)
        want, model_said = _logged(model, x)
        torch.testing.assert_close(got, want)
        assert said == model_said  # logged where the model pads, only there
    assert _logged(program, torch.randn(2, 9, 3))[1] == ["padded by 3"]
    assert any("the arm most sizes take runs at every size" in n
               for n in program.report.notes)


@pytest.mark.parametrize("model", [PadsInAnExpression, PadsInAnotherModule],
                         ids=lambda m: m.__name__)
def test_each_spelling_takes_the_general_side_at_every_size(model):
    model = model()
    program = _export(model)
    assert any(d.action == Action.ONE_ARM for d in program.report.decisions)
    for length in (5, 9, 13, 16, 30):
        x = torch.randn(2, length, 3)
        torch.testing.assert_close(program(x), model(x))


def test_an_arm_that_is_wrong_where_the_model_does_not_take_it_is_not_kept():
    model = ScalesWherePadded()
    program = _export(model)
    assert not any(d.action == Action.ONE_ARM for d in program.report.decisions)
    assert any("was not kept: its program failed verification" in n
               for n in program.report.notes), program.report.notes
    x = torch.randn(2, 8, 3)
    torch.testing.assert_close(program(x), model(x))  # a length the guard still accepts
    with pytest.raises(AssertionError, match="Guard failed"):
        program(torch.randn(2, 9, 3))


def test_general_side_is_python_outside_a_trace():
    assert general_side(True) is True
    assert general_side(0) == 0
    assert general_side([1]) == [1]


def _traced_length(n: int):
    """A dynamic size traced at ``n``, as torch.export's fake tensors hold it."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import (
        DimDynamic,
        ShapeEnv,
        StatelessSymbolicContext,
    )

    env = ShapeEnv()
    fake = FakeTensorMode(shape_env=env).from_tensor(
        torch.randn(2, n), symbolic_context=StatelessSymbolicContext(
            dynamic_sizes=[DimDynamic.STATIC, DimDynamic.DYNAMIC]))
    return fake.shape[1], env


@pytest.mark.parametrize(("traced", "test", "general"), [
    (128, lambda n: (32 - n % 32) % 32 > 0, True),  # Longformer at whole windows: it pads
    (14, lambda n: n == 14, False),  # TinyViT at one window: the partition
    (77, lambda n: (32 - n % 32) % 32 > 0, None),  # traced on the general side: as written
    (28, lambda n: n == 14, None),
    (70, lambda n: n > 8, None),
])
def test_general_side_leaves_the_special_side_only_where_the_trace_took_it(traced, test,
                                                                           general):
    n, env = _traced_length(traced)
    value = test(n)
    if general is None:  # the model's own arm, its test as written (a guard, where read)
        assert general_side(value) is value
    else:  # the other side, read from the traced sizes with no guard
        assert general_side(value) is general
    assert not env.guards


class PadsWithAWarningOnce(torch.nn.Module):
    def forward(self, x):
        pad = (-x.shape[1]) % 8
        if pad > 0:
            hf_logger.warning_once("padded to a multiple of 8")
            x = F.pad(x, (0, 0, 0, pad))
        return x.unflatten(1, (-1, 8)).sum(2)


hf_logger = logging.getLogger("tests.one_arm.once")


def test_a_show_once_log_is_compared_on_each_side_of_a_forced_branch():
    """transformers' ``logger.warning_once`` is an ``lru_cache`` on ``logging.Logger``:
    verification runs the model's forced side and the program's in one process, and the
    second of them logged nothing. Each observed run sees the once-methods fresh, as each
    sees every warning (``simplefilter("always")``); the user's caches are left as they
    were."""
    pytest.importorskip("transformers")
    import transformers.utils.logging  # noqa: F401 - puts warning_once on logging.Logger

    once = logging.Logger.warning_once
    model = PadsWithAWarningOnce()
    program = stitch.export(model, (torch.randn(2, 16, 4),),
                            examples=[((torch.randn(2, 32, 4),), {})])
    assert logging.Logger.warning_once is once
    for length in (5, 13, 16):
        x = torch.randn(2, length, 4)
        torch.testing.assert_close(program(x), model(x))
