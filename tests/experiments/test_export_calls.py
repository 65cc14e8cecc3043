"""The per-call view of one export: its calls listed as they end and summed, and the wrapped
functions put back after."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "experiments"))

import export_calls  # noqa: E402


@pytest.mark.hf
def test_an_export_is_listed_call_by_call_and_the_functions_put_back(tmp_path, capsys):
    import importlib

    import torch._higher_order_ops.utils as hop_utils

    from stitch import exporting, rewrite_export

    explain_module = importlib.import_module("capture.explain")
    before = (explain_module.explain, exporting.export_model, rewrite_export.export_model,
              hop_utils._hop_compile_and_call)
    log = tmp_path / "calls.log"
    assert export_calls.main(["xlm", "tiny", "--log", str(log)]) == 0
    text = log.read_text()
    assert "torch.export ok" in text  # the one export, as it ended
    assert "torch.export: 1 call(s), 0 failed" in text  # and the summary
    assert "xlm tiny: stitch.export" in capsys.readouterr().err
    assert (explain_module.explain, exporting.export_model, rewrite_export.export_model,
            hop_utils._hop_compile_and_call) == before
