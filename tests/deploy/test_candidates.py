"""``stitch.compile(..., candidates=...)`` narrows what ``auto`` builds, and says what is wrong
with a list it cannot use."""

from __future__ import annotations

import pytest
import torch

import stitch
from stitch.deploy import compile as compile_stage


class _Program:  # what compile reads before it builds: examples only
    examples = ()


def test_candidates_narrow_auto_in_the_machines_order(monkeypatch):
    seen = []

    def fake_select(program, backends, examples, **kw):
        seen.append(backends)
        return None, None
    monkeypatch.setattr(compile_stage, "select", fake_select)
    monkeypatch.setattr(compile_stage, "CompiledProgram", lambda *a: a)
    stitch.compile(_Program(), "auto", candidates=["onnxruntime", "inductor"])
    stitch.compile(_Program(), "auto")
    every = (compile_stage.AUTO_BACKENDS_GPU if torch.cuda.is_available()
             else compile_stage.AUTO_BACKENDS_CPU)
    assert seen == [["inductor", "onnxruntime"], every]


@pytest.mark.parametrize("backend, candidates, message", [
    ("auto", ["inductr"], "'inductr'] not among this machine's automatic candidates"),
    ("auto", [], "none not among"),
    ("aoti", ["aoti"], "candidates only narrow backend='auto'"),
])
def test_unusable_candidates_are_refused_with_the_fix(backend, candidates, message):
    with pytest.raises(stitch.StitchError, match=message.replace("[", r"\[").replace("(", r"\(")):
        stitch.compile(_Program(), backend, candidates=candidates)
