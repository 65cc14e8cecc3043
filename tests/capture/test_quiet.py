"""``quiet()`` (capture/quiet.py): torch's logs, shown warnings and stderr writes of the
thread that runs it go to the ``stitch.debug`` logger; everything is put back on exit, and
the ways stitch keeps the model's own output (``catch_warnings(record=True)``, the model's
loggers) still work inside it."""

from __future__ import annotations

import logging
import sys
import threading
import warnings

import pytest
import torch

from capture.quiet import DEBUG_LOGGER, MESSAGES_FILE, quiet


class _Mm(torch.nn.Module):
    def forward(self, x):
        return torch.mm(x, torch.ones(4, 4))


class _ConstantPred(torch.nn.Module):
    def forward(self, x):
        return torch.cond(x.shape[0] > 2, lambda t: t + 1, lambda t: t - 1, (x,))


def test_torch_messages_leave_stderr_alone(capfd):
    graph = torch.fx.symbolic_trace(_Mm())
    with quiet():
        logging.getLogger("torch.export._trace").error("always_classified is unsupported.")
        with pytest.raises(RuntimeError):  # the failing FX call still raises
            graph(torch.ones(2, 3))
        torch.export.export(_ConstantPred(), (torch.ones(3),))  # "Pred is a Python constant"
        print("def forward(self, arg0_1):", file=sys.stderr)  # torch's partial-graph print
    out, err = capfd.readouterr()
    assert err == "" and out == ""
    # without quiet() the same calls do write to stderr: the test above can fail
    with pytest.raises(RuntimeError):
        graph(torch.ones(2, 3))
    assert "Call using an FX-traced Module" in capfd.readouterr().err


def test_messages_reach_the_debug_logger(caplog, tmp_path):
    caplog.set_level(logging.DEBUG, logger="stitch")
    with quiet(str(tmp_path)):
        logging.getLogger("torch._dynamo").warning("dynamo says")
        warnings.warn("torch-ish warning", UserWarning, stacklevel=1)
        print("printed to stderr", file=sys.stderr)
    said = [r.getMessage() for r in caplog.records if r.name == DEBUG_LOGGER]
    assert any("dynamo says" in m and "torch._dynamo" in m for m in said), said
    assert any("torch-ish warning" in m for m in said), said
    assert any("printed to stderr" in m for m in said), said
    assert all(r.levelno == logging.DEBUG for r in caplog.records if r.name == DEBUG_LOGGER)
    written = (tmp_path / MESSAGES_FILE).read_text()
    assert "dynamo says" in written and "printed to stderr" in written


def test_state_is_put_back():
    torch_logger = logging.getLogger("torch")
    handlers, propagate = torch_logger.handlers, torch_logger.propagate
    stderr, show = sys.stderr, warnings.showwarning
    with pytest.raises(ValueError), quiet():
        raise ValueError("a refusal passes through")
    assert torch_logger.handlers is handlers and torch_logger.propagate is propagate
    assert sys.stderr is stderr and warnings.showwarning is show


def test_the_models_output_is_still_kept():
    """What stitch keeps of the model's runs: recorded warnings, its loggers' records."""
    seen = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    model_log = logging.getLogger("tests.quiet.model")
    handler = Keep()
    model_log.addHandler(handler)
    try:
        with quiet(), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            warnings.warn("model warning", UserWarning, stacklevel=1)
            model_log.warning("model log")
    finally:
        model_log.removeHandler(handler)
    assert [str(w.message) for w in caught] == ["model warning"]
    assert seen == ["model log"]


def test_other_threads_keep_their_stderr(capfd):
    def other():
        print("from another thread", file=sys.stderr)
        logging.getLogger("torch._dynamo").warning("another thread's torch log")

    with quiet():
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        print("from the exporting thread", file=sys.stderr)
    err = capfd.readouterr().err
    assert "from another thread" in err and "another thread's torch log" in err
    assert "from the exporting thread" not in err
