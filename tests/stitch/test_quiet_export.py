"""An export prints nothing: what stitch tries and abandons (partial FX graphs of failed
torch.export attempts, tracebacks of FX calls, torch's error-level log records, Dynamo's
warnings) goes to the ``stitch.debug`` logger; a refusal is its exception's message. The
model's own prints, logs and warnings still come out of the program, where eager has them.

PYTEST_DONT_REWRITE: pytest would rewrite the ``assert`` of the model below too, and the
rewritten one no longer makes torch.export's attempt fail (and print its graph) as a user's
``assert`` does.
"""

from __future__ import annotations

import logging
import re
import warnings

import pytest
import torch

import stitch

_model_log = logging.getLogger("tests.quiet_export")


class _SaysWhenPositive(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            print("positive")
            _model_log.warning("positive sum")
            warnings.warn("positive input", UserWarning, stacklevel=1)
            return x * 2
        return x - 1


class _AssertsOnData(torch.nn.Module):  # exported; torch.export's attempt printed its graph
    def forward(self, x):
        assert (x > -100).all(), "too small"
        return x.exp()


class _WhileItem(torch.nn.Module):
    def forward(self, x):
        while x.sum().item() < 10:
            x = x * 2
        return x


class _PrintsInACountedLoop(torch.nn.Module):  # unfixable: a loop counted by data (no
    def forward(self, x):  # bound its source gives) prints
        for i in range(int(x.sum().item())):
            print("step", i)
            x = x * 1.5
        return x - 1


class _NamesOnData(torch.nn.Module):  # guard-only: a helper's arms give a str by data
    def forward(self, x):
        return x * 2 if self._side(x) == "pos" else -x

    def _side(self, x):
        if x.sum() > 0:
            return "pos"
        return "neg"


def _examples(*tensors):
    return [((t,), {}) for t in tensors]


_NOISE = re.compile(r"def forward\(|class GraphModule|Traceback|^E\d{4} |ERROR|Warning:",
                    re.MULTILINE)


def _quiet(capfd) -> None:
    out, err = capfd.readouterr()
    assert not _NOISE.search(err), err[:2000]
    assert err == "" and out == "", (out + err)[:2000]


def test_successful_exports_print_nothing(capfd, caplog):
    caplog.set_level(logging.WARNING, logger=_model_log.name)
    for model, examples in [
        (_SaysWhenPositive(), _examples(torch.ones(3), -torch.ones(3))),
        (_AssertsOnData(), _examples(torch.ones(4), torch.zeros(4))),
        (_WhileItem(), _examples(torch.ones(3), torch.ones(3) * 0.5)),
    ]:
        capfd.readouterr()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            stitch.export(model, *examples[0], examples=examples)
        _quiet(capfd)
        assert caught == [] and not caplog.records  # the model's output: not at export


def test_the_program_still_says_what_eager_says(capfd, caplog):
    caplog.set_level(logging.WARNING, logger=_model_log.name)
    examples = _examples(torch.ones(3), -torch.ones(3))
    program = stitch.export(_SaysWhenPositive(), *examples[0], examples=examples)
    capfd.readouterr()
    with pytest.warns(UserWarning, match="positive input"):
        program(torch.ones(3))
    assert capfd.readouterr().out == "positive\n"
    assert [r.getMessage() for r in caplog.records] == ["positive sum"]


@pytest.mark.parametrize("model, examples, refusal", [
    (_PrintsInACountedLoop(), _examples(torch.ones(4), torch.ones(4) * 0.1),
     stitch.UnfixableBreaksError),
    (_NamesOnData(), _examples(torch.ones(4), -torch.ones(4)), stitch.GuardsRefusedError),
], ids=["unfixable", "guard_only"])
def test_a_refusal_is_its_exception_only(capfd, model, examples, refusal):
    capfd.readouterr()
    with pytest.raises(refusal) as raised:
        stitch.export(model, *examples[0], examples=examples)
    _quiet(capfd)
    assert "Traceback" not in str(raised.value) and "def forward(" not in str(raised.value)


def test_abandoned_attempts_reach_the_debug_log(caplog, tmp_path):
    """What torch said of the failed attempts is kept where asked for: the ``stitch``
    logger at DEBUG, and ``messages.log`` in ``Settings.dump_dir`` (``STITCH_DEBUG``)."""
    caplog.set_level(logging.DEBUG, logger="stitch")
    examples = _examples(torch.ones(4), torch.zeros(4))
    stitch.export(_AssertsOnData(), *examples[0], examples=examples,
                  settings=stitch.Settings(dump_dir=str(tmp_path)))
    debug = "\n".join(r.getMessage() for r in caplog.records if r.name == "stitch.debug")
    assert "def forward(" in debug
    assert "def forward(" in (tmp_path / "messages.log").read_text()
