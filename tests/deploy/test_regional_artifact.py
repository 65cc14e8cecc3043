"""A regionally lowered deployment saves into one ``.pt2`` that ``stitch.load`` runs in a fresh
process with nothing but the file: the program, its pieces compiled by AOTInductor where
that matches and pays, checked like every artifact. Outputs are compared with the model on
both sides of every cond, in a process that never saw the model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

import stitch
from stitch.serve.server import ServeOptions, prepare
from tests.lower.test_regional import NestedArm  # a cond inside a cond's arm

pytestmark = pytest.mark.slow  # Inductor and AOTInductor compile (a minute or two here)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))
from repro_aoti_cond_item import FramesOffset  # noqa: E402 - whole-graph AOTI fails on it


def _chain(y):
    for _ in range(8):  # eight passes over the tensor eagerly, one fused when compiled
        y = y * 1.01 + 0.5
    return y


class HeavyArm(torch.nn.Module):
    def forward(self, x, flag):
        (y,) = torch.cond(flag.sum() > 0, lambda x: (_chain(x),), lambda x: (x - 1,), (x,))
        return y[:2, :2] + 1


FRESH = textwrap.dedent("""
    import json, sys, torch, stitch
    loaded = stitch.load(sys.argv[1])
    calls = torch.load(sys.argv[2])
    torch.save([loaded(*args) for args in calls], sys.argv[3])
    print(json.dumps({"runs_with": loaded.manifest["runs_with"],
                      "pieces": loaded.manifest["pieces"]}))
""")


def _in_a_fresh_process(artifact: str, calls: list, tmp_path) -> tuple[list, dict]:
    inputs, outputs = str(tmp_path / "inputs.pt"), str(tmp_path / "outputs.pt")
    torch.save(calls, inputs)
    done = subprocess.run([sys.executable, "-c", FRESH, artifact, inputs, outputs],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 0, done.stderr[-3000:]
    return torch.load(outputs), json.loads(done.stdout.strip().splitlines()[-1])


def test_a_compiled_arm_ships_and_runs_both_sides_in_a_fresh_process(tmp_path):
    model, x = HeavyArm(), torch.randn(1024, 1024)
    program = stitch.export(model, (x, torch.ones(2)),
                            examples=[((x + 1, torch.full((2,), 3.0)), {}),
                                      ((x, -torch.ones(2)), {})])
    compiled = stitch.compile(program, "regional")
    path = compiled.save(str(tmp_path / "heavy.pt2"))
    calls = [(x, torch.ones(2)), (x * 2, -torch.ones(2)), (torch.randn(1024, 1024), torch.ones(2))]
    got, seen = _in_a_fresh_process(path, calls, tmp_path)
    assert seen["runs_with"] == "regional"
    assert [p["name"].split(".")[-1] for p in seen["pieces"]["compiled"]] == ["true_graph_0"], \
        seen["pieces"]["decisions"]
    for args, out in zip(calls, got, strict=True):
        torch.testing.assert_close(out, model(*args))
    # an artifact whose piece was cut from other code (checksums made to match) is refused
    doctored = _with_manifest(path, tmp_path / "doctored.pt2", lambda m: m["pieces"][
        "compiled"][0].update(code_sha256="0" * 64))
    with pytest.raises(stitch.ArtifactError, match="other code.*re-save"):
        stitch.load(doctored)


def test_the_pieces_of_an_arm_holding_a_cond_ship_and_run_in_a_fresh_process(tmp_path):
    model, x = NestedArm(), torch.randn(1024, 1024)
    program = stitch.export(model, (x, torch.ones(2)),
                            examples=[((x - 3, torch.ones(2)), {}),
                                      ((x, -torch.ones(2)), {})])
    path = stitch.compile(program, "regional").save(str(tmp_path / "nested.pt2"))
    calls = [(x, torch.ones(2)), (x - 3, torch.ones(2)), (x, -torch.ones(2))]
    got, seen = _in_a_fresh_process(path, calls, tmp_path)
    compiled = [p["name"] for p in seen["pieces"]["compiled"]]
    assert any(n.startswith("submod_1.true_graph_0.submod_") for n in compiled), \
        seen["pieces"]["decisions"]
    for args, out in zip(calls, got, strict=True):
        torch.testing.assert_close(out, model(*args))


def _with_manifest(path: str, out, change) -> str:
    """A copy of the artifact at ``path`` with its manifest changed and checksummed again."""
    from stitch.deploy.artifact import COMMENT_PREFIX, _sha256

    with zipfile.ZipFile(path) as z:
        entries = {i.filename: z.read(i.filename) for i in z.infolist()}
    name = next(n for n in entries if n.endswith("extra/stitch/manifest.json"))
    manifest = json.loads(entries[name])
    change(manifest)
    entries[name] = json.dumps(manifest).encode()
    with zipfile.ZipFile(out, "w") as z:
        for entry, data in entries.items():
            z.writestr(entry, data)
        z.comment = COMMENT_PREFIX + _sha256(entries[name]).encode()
    return str(out)


def test_a_graph_whole_graph_aoti_fails_on_ships_regionally(tmp_path):
    model = FramesOffset()
    program = stitch.export(model, (torch.tensor([[2, 3], [1, 4]]),),
                            examples=[((torch.tensor([[1, 5], [3, 2]]),), {})])
    path = stitch.compile(program, "regional").save(str(tmp_path / "frames.pt2"))
    # each cond on both sides, and a grid no example gave
    calls = [(torch.tensor(g),) for g in ([[2, 3], [1, 4]], [[1, 5], [3, 2]], [[3, 1], [2, 2]])]
    got, seen = _in_a_fresh_process(path, calls, tmp_path)
    assert seen["runs_with"] == "regional"
    for args, out in zip(calls, got, strict=True):
        assert torch.equal(out, model(*args))
    # what `stitch serve` does before it starts a server: load, bind requests, pick a variant
    runner, variant = prepare(path, ServeOptions())
    assert variant.name == "regional-cpu", variant
    name = runner.spec.inputs[0].name
    for (grid,) in calls:
        (answer,) = runner({name: grid.numpy()}).values()
        np.testing.assert_array_equal(answer, model(grid).numpy())
