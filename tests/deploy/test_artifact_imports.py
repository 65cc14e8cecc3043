"""What an artifact needs loaded before it loads: the library types its signature uses
(transformers' output classes, which register themselves when their module is imported) and
the operator libraries its graph calls (torchvision's ``nms``), recorded at save and loaded
by ``stitch.load`` in a process that imported nothing but stitch."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from conftest import REPO
from torch import nn

import stitch
from stitch.errors import StitchError
from stitch.pytree_types import op_libraries, register, spec_types

transformers = pytest.importorskip("transformers", reason="the hf extra is not installed")
torchvision = pytest.importorskip("torchvision", reason="the vision extra is not installed")


class KeepsBoxes(nn.Module):
    def forward(self, boxes, scores):
        return torchvision.ops.nms(boxes, scores, 0.5)


def test_the_operator_libraries_a_graph_calls_are_recorded():
    boxes = torch.tensor([[0.0, 0, 1, 1], [0, 0, 1, 1.1], [5, 5, 6, 6]])
    ep = torch.export.export(KeepsBoxes(), (boxes, torch.tensor([0.9, 0.8, 0.7])))
    assert op_libraries(ep.graph_module) == ["torch.ops.torchvision"]


def test_a_library_type_in_the_signature_is_recorded_and_a_missing_one_named():
    from transformers.modeling_outputs import BaseModelOutput

    _, spec = torch.utils._pytree.tree_flatten(BaseModelOutput(last_hidden_state=torch.ones(1)))
    assert spec_types(spec) == ["transformers.modeling_outputs.BaseModelOutput"]
    register(["transformers.modeling_outputs.BaseModelOutput", "torch.ops.torchvision"])
    with pytest.raises(StitchError, match="'no_such_library'(.|\n)*install it"):
        register(["torch.ops.no_such_library"])
    with pytest.raises(StitchError, match="no_such_module.Thing"):
        register(["no_such_module.Thing"])


class ReturnsModelOutput(nn.Module):
    def forward(self, x):
        from transformers.modeling_outputs import BaseModelOutput

        h = x * 2
        if h.sum() > 0:
            h = h + 1
        return BaseModelOutput(last_hidden_state=h)


@pytest.mark.slow
def test_an_artifact_returning_a_transformers_output_loads_in_a_bare_process(tmp_path):
    x = torch.randn(2, 3)
    model = ReturnsModelOutput()
    program = stitch.export(model, (x,), examples=[((-x.abs() - 1,), {})])
    path = str(tmp_path / "model.onnx")
    program.save(path)
    code = ("import sys, torch, stitch\n"
            "program = stitch.load(sys.argv[1])\n"
            "out = program(torch.load(sys.argv[2], weights_only=True))\n"
            "torch.save(out.last_hidden_state, sys.argv[3])\n")
    for i, v in enumerate((x, -x.abs() - 1)):
        torch.save(v, tmp_path / f"in{i}.pt")
        done = subprocess.run([sys.executable, "-c", code, path, str(tmp_path / f"in{i}.pt"),
                               str(tmp_path / f"out{i}.pt")], capture_output=True, text=True,
                              timeout=300, cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO))
        assert done.returncode == 0, done.stderr[-2000:]
        torch.testing.assert_close(torch.load(tmp_path / f"out{i}.pt", weights_only=True),
                                   model(v).last_hidden_state)
