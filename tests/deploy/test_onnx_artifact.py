"""The ``.onnx`` artifact: saved, loaded in a fresh process with its epilogue, damaged files
refused with ArtifactError, and the CLI's export / inspect / run."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys

import pytest
import torch
from conftest import REPO, zoo_program

import stitch
from stitch.deploy.artifact import ArtifactError
from tests.zoo import make

onnx = pytest.importorskip("onnx", reason="the onnx extra is not installed")
pytest.importorskip("onnxruntime", reason="the onnx extra is not installed")

CASE = "print_in_branch"  # a branch, and a print inside it (an epilogue entry under a guard)


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("onnx") / "model.onnx")
    zoo_program(CASE).save(path)
    return path


def _inputs():
    _model, args, kwargs, examples = make(CASE)
    return [(args, kwargs), *examples]


@pytest.mark.slow
def test_load_in_a_fresh_process_replays_the_epilogue(saved, tmp_path):
    inputs = [a for a, _ in _inputs()]
    torch.save(inputs, tmp_path / "inputs.pt")
    code = ("import sys, torch, stitch\n"
            "program = stitch.load(sys.argv[1])\n"
            "inputs = torch.load(sys.argv[2], weights_only=True)\n"
            "torch.save([program(*a) for a in inputs], sys.argv[3])\n")
    done = subprocess.run([sys.executable, "-c", code, saved, str(tmp_path / "inputs.pt"),
                           str(tmp_path / "out.pt")], capture_output=True, text=True,
                          timeout=300, cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO))
    assert done.returncode == 0, done.stderr[-2000:]
    model = make(CASE)[0]
    got = torch.load(tmp_path / "out.pt", weights_only=True)
    printed = io.StringIO()
    for a, out in zip(inputs, got, strict=True):
        with torch.no_grad(), contextlib.redirect_stdout(printed):
            torch.testing.assert_close(out, model(*a), rtol=1e-4, atol=1e-5)
    assert printed.getvalue().strip()  # the model prints on some input
    assert done.stdout == printed.getvalue()  # the loaded artifact printed the same


@pytest.mark.slow
def test_manifest_and_epilogue_sit_in_the_onnx_metadata(saved):
    proto = onnx.load(saved)
    props = {p.key: p.value for p in proto.metadata_props}
    manifest = json.loads(props["stitch.manifest"])
    assert manifest["container"] == "onnx" and set(manifest["entries"]) == {
        "graph", "stitch.epilogue", "stitch.runner"}
    assert json.loads(props["stitch.epilogue"])  # the print, as data
    assert any(n.op_type == "If" for n in proto.graph.node)  # the cond, inside the graph
    loaded = stitch.load(saved)
    assert loaded.manifest["deployment"]["chosen"] == "onnxruntime"


def _rewrite(path: str, out: str, change) -> str:
    proto = onnx.load(path)
    change(proto)
    with open(out, "wb") as f:
        f.write(proto.SerializeToString())
    return out


def _tamper_weight(proto) -> None:
    init = proto.graph.initializer[0]
    values = onnx.numpy_helper.to_array(init).copy()
    values.flat[0] += 1.0
    init.CopyFrom(onnx.numpy_helper.from_array(values, init.name))


def _tamper_manifest(proto) -> None:
    entry = next(p for p in proto.metadata_props if p.key == "stitch.manifest")
    entry.value = entry.value.replace('"onnxruntime"', '"aoti"')


def _tamper_epilogue(proto) -> None:
    entry = next(p for p in proto.metadata_props if p.key == "stitch.epilogue")
    entry.value = entry.value.replace("positive", "negative")


def _strip_stitch(proto) -> None:
    kept = [p for p in proto.metadata_props if not p.key.startswith("stitch.")]
    del proto.metadata_props[:]
    proto.metadata_props.extend(kept)


@pytest.mark.slow
@pytest.mark.parametrize("damage, message", [
    ("truncated", "not an ONNX model|damaged|checksum|not a stitch artifact"),
    ("not_onnx", "not an ONNX model|not a stitch artifact"),
    ("missing", "no such file"),
    ("weight", "graph fails its checksum"),
    ("manifest", "manifest does not match its checksum"),
    ("epilogue", "stitch.epilogue fails its checksum"),
    ("foreign", "not a stitch artifact"),
])
def test_damaged_onnx_artifacts_are_refused(saved, tmp_path, damage, message):
    path = str(tmp_path / "bad.onnx")
    data = open(saved, "rb").read()
    if damage == "truncated":
        open(path, "wb").write(data[: len(data) // 2])
    elif damage == "not_onnx":
        open(path, "w").write("this is not a model\n")
    elif damage == "missing":
        path = str(tmp_path / "absent.onnx")
    else:
        change = {"weight": _tamper_weight, "manifest": _tamper_manifest,
                  "epilogue": _tamper_epilogue, "foreign": _strip_stitch}[damage]
        _rewrite(saved, path, change)
    with pytest.raises(ArtifactError, match=message):
        stitch.load(path)


@pytest.mark.slow
def test_cli_export_inspect_run_onnx(tmp_path, capsys):
    from stitch.cli import main

    path = str(tmp_path / "cli.onnx")
    assert main(["export", f"tests.zoo:{CASE}", "-o", path, "--backend", "onnxruntime"]) == 0
    capsys.readouterr()
    assert main(["inspect", path]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["container"] == "onnx" and shown["onnx"]["bytes"] > 0
    assert shown["deployment"]["chosen"] == "onnxruntime" and shown["epilogue"]
    (args, _kwargs), *_ = _inputs()
    torch.save(tuple(args), tmp_path / "inputs.pt")
    assert main(["run", path, "--inputs", str(tmp_path / "inputs.pt")]) == 0
    out = capsys.readouterr().out
    printed = io.StringIO()
    with torch.no_grad(), contextlib.redirect_stdout(printed):
        want = make(CASE)[0](*args)
    assert out.startswith(printed.getvalue())  # the epilogue's print, then the outputs
    assert out[len(printed.getvalue()):].strip() == str(want)


@pytest.mark.slow
def test_a_stateful_program_loads_with_its_buffers_at_export(tmp_path):
    """Buffer updates are ONNX state: the loaded file starts from the exported values and
    advances call after call like the model."""
    path = str(tmp_path / "stateful.onnx")
    zoo_program("buffer_in_branch").save(path)
    loaded = stitch.load(path)
    model, args, kwargs, examples = make("buffer_in_branch")
    for a, k in [(args, kwargs), *examples, (args, kwargs), (args, kwargs)]:
        with torch.no_grad():
            torch.testing.assert_close(loaded(*a, **k), model(*a, **k))


def test_a_sequential_with_a_batch_the_examples_vary_saves_and_loads(tmp_path):
    """``nn.Sequential.forward(input)``: a copy of the graph renames the placeholder that
    shadows the builtin (``input_1``), and the program's verifier refused its spec
    (SpecViolationError); a dimension made dynamic from the examples has no upper bound,
    which the signature wrote as an AttributeError (sympy's int_oo)."""
    from stitch.deploy.signature import io_signature

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    program = stitch.export(model, (torch.randn(4, 4),), examples=[((torch.randn(6, 4),), {})])
    (spec,) = io_signature(program.exported_program)["inputs"]
    assert spec["dynamic"] == {"0": [2, None]}, spec
    loaded = stitch.load(program.save(str(tmp_path / "seq.onnx")))
    x = torch.randn(5, 4)
    torch.testing.assert_close(loaded(x), model(x))
