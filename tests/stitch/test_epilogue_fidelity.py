"""What the program gives back and replays is what the model gives: Python numbers stay
numbers, logging's mapping argument and the module-level ``logging.info`` replay as
called, and a scalar read handed to a log call is formatted as the number it was."""

from __future__ import annotations

import json
import logging
import warnings

import torch

import stitch

log = logging.getLogger("stitch.tests.fidelity")


class ReturnsNumbers(torch.nn.Module):
    def forward(self, x):
        h = x * 2
        return h, {"mean": h.mean().item(), "n_pos": int((h > 0).sum()),
                   "any_big": bool(h.abs().max() > 3)}


class LogsAMapping(torch.nn.Module):
    def forward(self, x):
        h = x * 2
        log.info("mean=%(m).2f rows=%(n)d", {"m": h.mean().item(), "n": x.shape[0]})
        return h


class LogsThroughTheModule(torch.nn.Module):
    def forward(self, x):
        logging.info("batch of %d rows, mean %.3f", x.shape[0], x.mean().item())
        return x + 1


class LogsARead(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x)
        m = h.abs().max().item()
        log.info("max abs %.3f", m)
        return h * m


class _Messages(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _logged(logger: logging.Logger, call) -> list[str]:
    handler, level = _Messages(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        call()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    return handler.messages


def test_python_numbers_the_model_returns_stay_numbers():
    x = torch.randn(4, 8)
    model = ReturnsNumbers()
    program = stitch.export(model, (x,), examples=[((x * 3,), {})])
    got, want = program(x)[1], model(x)[1]
    assert {k: type(v) for k, v in got.items()} == {"mean": float, "n_pos": int,
                                                   "any_big": bool}
    assert got == want
    json.dumps(got)


def test_a_log_call_with_a_mapping_is_replayed():
    x = torch.randn(4, 8)
    model = LogsAMapping()
    program = stitch.export(model, (x,), examples=[((x * 3,), {})])
    assert _logged(log, lambda: program(x)) == _logged(log, lambda: model(x)) != []


def test_module_level_logging_is_replayed_at_the_level_of_the_call():
    """Exported with the root logger at WARNING (nothing logged); logged once enabled."""
    root = logging.getLogger()
    x = torch.randn(4, 8)
    model = LogsThroughTheModule()
    level = root.level
    root.setLevel(logging.WARNING)
    try:
        program = stitch.export(model, (x,), examples=[((x * 3,), {})])
    finally:
        root.setLevel(level)
    assert _logged(root, lambda: program(x)) == _logged(root, lambda: model(x)) != []


def test_a_scalar_read_handed_to_a_log_call_is_formatted_as_a_number():
    torch.manual_seed(0)
    x = torch.randn(4, 4)
    model = LogsARead()
    program = stitch.export(model, (x,), examples=[((x * 3,), {})])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        messages = _logged(log, lambda: program(x))
    assert messages == _logged(log, lambda: model(x))
    assert not [w for w in caught if "requires_grad" in str(w.message)]


class RootLogOnNaN(torch.nn.Module):
    """``logging.warning`` (the module's function) in a branch no example takes, logging a
    shape: its cond failed to trace ("module 'logging' has no attribute 'name'") and the
    shape came back from torch's pytree as a tuple."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x)
        if torch.isnan(h).any():
            logging.warning("nan in %s", h.shape)
            h = torch.nan_to_num(h)
        return h


def test_the_root_loggers_function_in_an_untaken_branch_replays_as_called(caplog):
    torch.manual_seed(0)
    model = RootLogOnNaN()
    program = stitch.export(model, (torch.randn(2, 4),), examples=[((torch.ones(2, 4),), {})])
    nan = torch.full((2, 4), float("nan"))
    with caplog.at_level(logging.WARNING):
        want = model(nan)
        eager = [(r.name, r.getMessage()) for r in caplog.records]
        caplog.clear()
        got = program(nan)
        replayed = [(r.name, r.getMessage()) for r in caplog.records]
    torch.testing.assert_close(got, want)
    assert replayed == eager == [("root", "nan in torch.Size([2, 4])")]
