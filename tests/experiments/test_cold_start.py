"""The cold-start harness's pure parts: artifact format by deployment, the child's code and
its report line, the modules an artifact's containers need. No model runs here."""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.utils._pytree as pytree

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "experiments"))

from cold_start import (  # noqa: E402
    artifact_kind,
    artifact_suffix,
    child_code,
    container_modules,
    merged,
    parse_cold,
    ratio,
)


def test_artifact_ships_what_auto_deployed():
    assert artifact_suffix("onnxruntime") == ".onnx"
    assert artifact_suffix("aoti+cudagraphs") == ".pt2"
    assert artifact_kind("regional") == "pt2 (regional)"
    assert artifact_kind("model") == "pt2 (aoti)"  # saving the eager winner builds AOTInductor


def test_child_code_is_valid_python_for_every_side():
    prepared = {"suite": "hf", "class": "XLMModel", "artifact": "xlm.pt2",
                "container_modules": ["transformers.modeling_outputs"]}
    for kind in ("artifact", "compile", "eager"):
        code = child_code(kind, prepared, "/tmp/row", "/tmp/row/out.pt")
        compile(code, kind, "exec")
        assert code.startswith("import time\nt0 = time.perf_counter()")
    artifact = child_code("artifact", prepared, "/tmp/row", "/tmp/row/out.pt")
    assert "import transformers.modeling_outputs" in artifact
    assert "torch.compile" in child_code("compile", prepared, "/tmp/row", "/tmp/row/out.pt")


def test_parse_cold_and_ratio():
    assert parse_cold("noise\nCOLD {\"first_output\": 1.5}\n") == {"first_output": 1.5}
    assert parse_cold("Traceback ...") is None
    assert ratio(1.0, 4.0) == 0.25
    assert ratio(None, 4.0) is None


def test_container_modules_names_only_foreign_containers():
    spec = pytree.tree_structure({"x": [torch.ones(1), (1, (2,))]})
    assert container_modules(spec) == []

    class Box(dict):
        pass

    pytree.register_pytree_node(Box, lambda b: (list(b.values()), list(b)),
                                lambda values, keys: Box(zip(keys, values, strict=True)))
    try:
        assert container_modules(pytree.tree_structure((Box(a=1),))) == [__name__]
    finally:
        pytree._deregister_pytree_node(Box)


def test_merged_rows_keep_the_commit_they_were_measured_at(tmp_path):
    path = tmp_path / "cold_start.json"
    old = [{"suite": "hf", "model": "xlm", "cold": 1},
           {"suite": "torchvision", "model": "retinanet_resnet50_fpn", "error": "x"}]
    path.write_text(json.dumps({"meta": {"commit": "a" * 40, "dirty": [], "date": "d0"},
                                "rows": old}))
    new = [{"suite": "torchvision", "model": "retinanet_resnet50_fpn", "cold": 2,
            "commit": "bbbbbbbbbb+", "date": "d1"},
           {"suite": "hf", "model": "ctrl", "cold": 3, "commit": "bbbbbbbbbb+", "date": "d1"}]
    rows = merged(str(path), new)
    assert [r["model"] for r in rows] == ["ctrl", "xlm", "retinanet_resnet50_fpn"]  # ROWS order
    assert rows[1]["commit"] == "aaaaaaaaaa" and rows[1]["date"] == "d0"
    assert rows[2]["cold"] == 2 and rows[2]["commit"] == "bbbbbbbbbb+"
