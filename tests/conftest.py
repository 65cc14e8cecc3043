"""Shared fixtures: censuses are computed once per session and shared between tests."""

from __future__ import annotations

import functools
import importlib.util
import os
import subprocess
import sys

import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LEGACY_PYTHON = os.path.join(REPO, ".venv-hf452", "bin", "python")


def pytest_collection_modifyitems(config, items):
    no_gpu = pytest.mark.skip(reason="needs a CUDA GPU; torch.cuda.is_available() is False here")
    no_hf = pytest.mark.skip(reason="transformers is not installed (pip install -e '.[hf]')")
    no_legacy = pytest.mark.skip(
        reason=f"transformers 4.52.4 environment missing at {LEGACY_PYTHON}; run make install-hf452")
    has_hf = importlib.util.find_spec("transformers") is not None
    for item in items:
        if "gpu" in item.keywords and not torch.cuda.is_available():
            item.add_marker(no_gpu)
        if "hf" in item.keywords and not has_hf:
            item.add_marker(no_hf)
        if "hf_legacy" in item.keywords and not os.path.exists(LEGACY_PYTHON):
            item.add_marker(no_legacy)


@functools.cache
def zoo_census(name: str):
    from capture import explain
    from stitch.zoo import make

    model, args, kwargs, examples = make(name)
    return explain(model, args, kwargs, examples=examples)


def run_legacy(code: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """Run ``code`` with the transformers 4.52.4 environment, this repo on the path."""
    env = dict(os.environ, PYTHONPATH=REPO)
    return subprocess.run([LEGACY_PYTHON, "-c", code], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=REPO)


@pytest.fixture(scope="session")
def census_of():
    return zoo_census


@pytest.fixture(autouse=True)
def _no_leaked_trace():
    before = sys.gettrace()
    yield
    assert sys.gettrace() is before, "a test left a trace function installed"


@functools.cache
def zoo_program(name: str, strict: bool = False):
    import stitch
    from stitch.zoo import make

    model, args, kwargs, examples = make(name)
    return stitch.export(model, args, kwargs, examples=examples, strict=strict)


@pytest.fixture
def drop_guarded_replays(monkeypatch):
    """Sabotage: ``drop(kind)`` makes the epilogue skip its guarded state entries of that
    kind (a branch's additions, sets or item sets), so verification must refuse."""
    import importlib

    replay = importlib.import_module("stitch.epilogue.replay")
    real = replay._set_state

    def drop(kind: str) -> None:
        def forgetful(entry, values, lists):
            if not (entry.kind == kind and entry.guard is not None):
                real(entry, values, lists)

        monkeypatch.setattr(replay, "_set_state", forgetful)

    return drop
