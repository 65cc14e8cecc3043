"""Lowering, selection and the deployment artifact (one AOTInductor compile per session)."""

from __future__ import annotations

import functools
import json
import logging
import os
import subprocess
import sys
import zipfile

import pytest
import torch
from conftest import REPO

import stitch
from stitch.deploy.artifact import ArtifactError, read_manifest

pytestmark = pytest.mark.slow


@functools.cache
def demo():
    from stitch.demo_model import make_demo

    model, args, kwargs, examples = make_demo()
    program = stitch.export(model, args, kwargs, examples=examples)
    return model, program


@functools.cache
def compiled_auto():
    return stitch.compile(demo()[1], "auto", repeats=5)


@pytest.fixture(scope="session")
def artifact(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("artifact") / "demo.pt2")
    compiled_auto().save(path)
    return path


def test_auto_selection_records_every_candidate_and_never_deploys_slower_than_eager():
    decision = compiled_auto().decision
    names = [c.name for c in decision.candidates]
    assert names[:4] == ["eager", "inductor", "regional", "aoti"]
    regional = decision.candidates[2]  # built only where the whole graph does not compile
    assert not regional.available and "inductor compiles the whole graph" in regional.reason
    chosen = [c for c in decision.candidates if c.chosen]
    assert len(chosen) == 1 and chosen[0].backend == decision.chosen
    eager = decision.candidates[0]
    assert chosen[0].median_ms <= eager.median_ms
    assert all(c.correct for c in decision.candidates if c.available)
    unavailable = [c for c in decision.candidates if not c.available]
    assert any("CUDA" in c.reason for c in unavailable)  # no GPU here: said, not silent


def _slow_builder(backend, prog, example):
    from stitch.lower.backends import Built

    inner = prog._module

    def run(*a, **k):
        for _ in range(20):
            out = inner(*a, **k)
        return out
    return Built(backend, run, 0.0)


def test_auto_picks_eager_when_eager_is_fastest():
    import copy

    from stitch.deploy.profile import select

    program = copy.copy(demo()[1])
    program.model = None  # graphs only: the model candidate is tested below
    built, decision = select(program, ["inductor"], program.examples, repeats=5,
                             builders={"inductor": _slow_builder})
    assert decision.chosen == "eager" and built.backend == "eager"
    assert "nothing correct was faster" in decision.candidates[0].reason


def _wrong_builder(backend, prog, example):
    from stitch.lower.backends import Built

    inner = prog._module

    def run(*a, **k):
        out = inner(*a, **k)
        return torch.utils._pytree.tree_map(
            lambda t: t + 1 if isinstance(t, torch.Tensor) and t.is_floating_point() else t,
            out)
    return Built(backend, run, 0.0)


def test_regional_is_built_where_inductor_compiles_the_whole_graph_wrongly():
    import copy

    from stitch.deploy.profile import select

    program = copy.copy(demo()[1])
    program.model = None
    built_for = []

    def regional(backend, prog, example):
        built_for.append(backend)
        return _slow_builder(backend, prog, example)

    _, decision = select(program, ["inductor", "regional"], program.examples, repeats=3,
                         builders={"inductor": _wrong_builder, "regional": regional})
    names = {c.name: c for c in decision.candidates}
    assert "wrong results" in names["inductor"].reason
    assert built_for == ["regional"] and names["regional"].available
    assert names["regional"].correct


def test_auto_deploys_the_eager_model_when_it_beats_every_graph_and_says_so():
    from stitch.deploy.compiled import CompiledProgram
    from stitch.deploy.profile import select

    model, program = demo()
    calls = []
    hook = model.register_forward_hook(lambda m, *a: calls.append(m))  # copied with it
    try:
        built, decision = select(program, ["inductor"], program.examples, repeats=5,
                                 builders={"eager": _slow_builder, "inductor": _slow_builder})
    finally:
        hook.remove()
    assert calls and all(m is not model for m in calls)  # a copy was timed, never the user's
    assert decision.chosen == "model" and built.backend == "model"
    assert decision.graph in ("eager", "inductor") and "no graph clearly beat it" in decision.reason
    names = {c.name: c for c in decision.candidates}
    assert names["model"].chosen and names["model"].median_ms < names[decision.graph].median_ms
    compiled = CompiledProgram(program, built, decision)
    for ex in program.examples:
        with torch.no_grad():
            torch.testing.assert_close(compiled(*ex.args, **ex.kwargs),
                                       model(*ex.args, **ex.kwargs))
    saved = decision.for_artifact().to_json()  # what save() writes: an artifact holds a graph
    assert saved["chosen"] == decision.graph and "eager model deployed" in saved["reason"]
    assert [c["backend"] for c in saved["candidates"] if c["chosen"]] == [decision.graph]


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_each_backend_matches_eager_on_every_branch(backend):
    model, program = demo()
    compiled = stitch.compile(program, backend)
    for ex in program.examples:
        with torch.no_grad():
            torch.testing.assert_close(compiled(*ex.args, **ex.kwargs), model(*ex.args, **ex.kwargs))


def test_saved_artifact_is_one_zip_with_json_and_no_pickle(artifact):
    manifest, epilogue = read_manifest(artifact)
    assert manifest["torch_version"] == torch.__version__
    # profiling may choose any graph backend; a .pt2 always holds the AOTInductor build
    assert manifest["deployment"]["chosen"] in ("eager", "inductor", "aoti", "onnxruntime")
    assert manifest["runs_with"] == "aoti"
    assert manifest["inputs"][0]["shape"] == [4, 32]
    assert len(epilogue) == 1 and epilogue.entries[0].kind == "log"
    with zipfile.ZipFile(artifact) as z:
        names = z.namelist()
    assert not any(n.endswith((".pkl", "data.pkl")) for n in names)
    assert any("aotinductor" in n for n in names)


def test_load_in_a_fresh_process_matches_model_with_side_effects(artifact):
    code = f"""
import logging, torch, stitch
from stitch.demo_model import make_demo
records = []
logging.Logger.handle = lambda self, r: r.name == "stitch.demo" and records.append(r.getMessage())
logging.getLogger("stitch.demo").setLevel(logging.INFO)
model, args, kwargs, examples = make_demo()
program = stitch.load({artifact!r})
for a, k in [(args, kwargs)] + examples:
    n = len(records)
    with torch.no_grad():
        got = program(*a, **k)
    with torch.no_grad():
        want = model(*a, **k)
    torch.testing.assert_close(got, want)
    assert records[n] == records[n + 1] and records[n].startswith("hidden norm"), records
print("LOADED-OK", len(records))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, cwd=REPO)
    assert "LOADED-OK 6" in done.stdout, done.stderr[-3000:]


def _damaged(src: str, tmp_path, how: str) -> str:
    path = str(tmp_path / f"{how}.pt2")
    if how == "truncated":
        data = open(src, "rb").read()
        open(path, "wb").write(data[: len(data) // 2])
        return path
    if how == "not_an_artifact":
        open(path, "wb").write(b"hello, I am not a zip")
        return path
    with zipfile.ZipFile(src) as z_in, zipfile.ZipFile(path, "w") as z_out:
        for info in z_in.infolist():
            data = z_in.read(info.filename)
            if how == "corrupted" and info.filename.endswith(".so"):
                data = data[:-100] + b"\0" * 100  # flipped bytes in the compiled graph
            if info.filename.endswith("manifest.json"):
                if how == "plain_aoti":
                    continue
                if how == "tampered_manifest":
                    m = json.loads(data)
                    m["deployment"]["chosen"] = "tensorrt"
                    data = json.dumps(m).encode()
            z_out.writestr(info, data)
        z_out.comment = z_in.comment
    return path


@pytest.mark.parametrize("how, message", [
    ("missing", "no such file"),
    ("truncated", "not a stitch artifact|damaged"),
    ("not_an_artifact", "not a stitch artifact"),
    ("corrupted", "fails its checksum"),
    ("tampered_manifest", "manifest does not match its checksum"),
    ("plain_aoti", "no extra/stitch/manifest.json"),
])
def test_damaged_artifacts_are_refused_before_loading_code(artifact, tmp_path, how, message,
                                                           monkeypatch):
    path = str(tmp_path / "absent.pt2") if how == "missing" else _damaged(artifact, tmp_path, how)
    loaded = []
    monkeypatch.setattr(torch._inductor, "aoti_load_package", lambda p: loaded.append(p))
    with pytest.raises(ArtifactError, match=message):
        stitch.load(path)
    assert loaded == []  # refused before any compiled code was loaded


def test_wrong_torch_version_is_refused(artifact, tmp_path, monkeypatch):
    from stitch.deploy import artifact as art

    monkeypatch.setattr(art.torch, "__version__", "2.9.0")
    with pytest.raises(ArtifactError, match="made by torch .*this is torch 2.9.0"):
        stitch.load(artifact)


def test_save_is_atomic(tmp_path):
    _, program = demo()
    target = tmp_path / "out.pt2"
    compiled = compiled_auto()
    compiled.save(str(target))
    assert target.exists() and not list(tmp_path.glob("*.partial"))


def test_cli_inspect_and_run(artifact, tmp_path):
    from stitch.demo_model import make_demo

    _, args, _, _ = make_demo()
    inputs = tmp_path / "inputs.pt"
    torch.save(args, inputs)
    env = dict(os.environ)
    out = subprocess.run([sys.executable, "-m", "stitch", "inspect", artifact],
                         capture_output=True, text=True, timeout=120, cwd=REPO, env=env)
    assert out.returncode == 0 and '"format": "stitch-artifact"' in out.stdout
    ran = subprocess.run([sys.executable, "-m", "stitch", "run", artifact, "--inputs",
                          str(inputs)], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert ran.returncode == 0 and "tensor(" in ran.stdout, ran.stderr[-2000:]
    bad = subprocess.run([sys.executable, "-m", "stitch", "inspect", str(tmp_path / "x.pt2")],
                         capture_output=True, text=True, timeout=120, cwd=REPO)
    assert bad.returncode == 2 and "no such file" in bad.stderr


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_stateful_program_deploys_from_the_exported_state(backend):
    """Checking a backend runs it; the deployed copy must still start where the model does."""
    from tests.zoo import CASES, make

    model, args, kwargs, examples = make("buffer_in_branch")
    program = stitch.export(model, args, kwargs, examples=examples)
    compiled = stitch.compile(program, backend)
    fresh = make("buffer_in_branch")[0]
    for ex_args, ex_kwargs in CASES["buffer_in_branch"].inputs() * 2:
        with torch.no_grad():
            torch.testing.assert_close(compiled(*ex_args, **ex_kwargs),
                                       fresh(*ex_args, **ex_kwargs))


def test_loaded_artifact_is_correct_from_several_threads(artifact):
    from concurrent.futures import ThreadPoolExecutor

    model, program = demo()
    loaded = stitch.load(artifact)
    inputs = [torch.randn(4, 32, generator=torch.Generator().manual_seed(i)) for i in range(8)]
    with torch.no_grad():
        expected = [model(x) for x in inputs]
    logging.getLogger("stitch.demo").setLevel(logging.ERROR)  # keep the test output quiet

    def work(i):
        with torch.no_grad():
            return [loaded(inputs[(i + j) % 8]) for j in range(10)], i

    with ThreadPoolExecutor(max_workers=4) as pool:
        for outs, i in pool.map(work, range(4)):
            for j, out in enumerate(outs):
                torch.testing.assert_close(out, expected[(i + j) % 8])



class _Drifting(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.state = torch.zeros(8)  # a plain tensor attribute, set on every call

    def forward(self, x):
        self.state = self.state * 0.5 + x.mean(0)
        return self.lin(x) + self.state


class _Cell(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("h", torch.zeros(8))

    def forward(self, x):
        self.h = torch.tanh(self.h + x.mean(0))  # a submodule rebinding its buffer
        return x + self.h


class _WithCell(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cell = _Cell()

    def forward(self, x):
        return self.cell(x * 2)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_a_recurrent_state_deploys_and_compounds_as_in_eager(backend):
    """State kept as buffers of the program (stitch/python_state.py,
    export_wrapper._write_back_rebound): the compiled program updates it call after call, as the
    model does."""
    for make in (_Drifting, _WithCell):
        torch.manual_seed(0)
        model, x = make(), torch.randn(4, 8)
        compiled = stitch.compile(stitch.export(model, (x,)), backend)
        for step in range(3):
            with torch.no_grad():
                torch.testing.assert_close(compiled(x + step), model(x + step))
