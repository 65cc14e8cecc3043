"""``stitch.compile``: lower a StitchedProgram to one backend, or pick one by profiling;
and ``StitchedProgram.save``: lower it to the artifact format's backend, then save."""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch

from ..errors import StitchError
from ..lower import build
from .artifact import ArtifactError
from .compiled import CompiledProgram
from .graph_replay import cudagraph_variant
from .profile import (
    Candidate,
    DeploymentDecision,
    accepted,
    checked_inputs,
    float64_reference,
    select,
    worst_error,
)
from .save import artifact_format, save_compiled

# "regional" is built only where "inductor" failed to build (profile.select)
AUTO_BACKENDS_CPU = ["inductor", "regional", "aoti", "onnxruntime"]
AUTO_BACKENDS_GPU = ["inductor", "regional", "aoti", "tensorrt", "onnxruntime"]


def compile(program, backend: str = "auto", *, cudagraphs: bool | str = "auto",
            repeats: int = 20, candidates: Sequence[str] | None = None) -> CompiledProgram:
    """Lower ``program``; with ``backend="auto"`` build every candidate this machine has,
    check each against eager, time them, and deploy the fastest correct one (never one
    slower than eager). The decision is recorded on the result and in saved artifacts.

    ``candidates`` narrows what ``auto`` builds (e.g. ``["inductor", "aoti"]`` to skip the
    ONNX export, a few seconds a model); by default every backend this machine has."""
    gpu = torch.cuda.is_available()
    if cudagraphs is True and not gpu:
        raise StitchError("cudagraphs=True needs a CUDA device; torch.cuda.is_available() is "
                          "False here. Use cudagraphs='auto' (records why it is off) or False.")
    if candidates is not None and backend != "auto":
        raise StitchError(f"candidates={list(candidates)} was given with backend={backend!r}; "
                          "candidates only narrow backend='auto'. Pass one or the other.")
    if backend == "auto":
        backends = _candidates(AUTO_BACKENDS_GPU if gpu else AUTO_BACKENDS_CPU, candidates)
        built, decision = select(program, backends, program.examples, repeats=repeats,
                                 cudagraphs=cudagraphs)
        return CompiledProgram(program, built, decision)
    built = build(backend, program, program.example)
    reference = program.exported_program.module()
    reference = copy.deepcopy(reference)  # examples run in order on a fresh state, like built
    examples, expected = accepted(reference, checked_inputs(program, program.examples))
    exact = float64_reference(program, examples)
    worst = worst_error(built, examples, expected, f"backend {backend}", exact)
    if cudagraphs is True:
        built = cudagraph_variant(program, built, examples)
        worst = max(worst, worst_error(built, examples, expected,
                                        f"backend {backend} replayed from CUDA graphs", exact))
    if built.reset is not None:
        built.reset()  # checking advanced its buffers: deploy the exported state
    candidate = Candidate(backend, cudagraphs is True, True, True, built.compile_seconds, None,
                          None, worst, True, "requested by the caller", built.predicated,
                          built.note)
    decision = DeploymentDecision(chosen=candidate.name, reason="requested",
                                  device="cuda" if gpu else "cpu",
                                  threads=torch.get_num_threads(), candidates=(candidate,))
    return CompiledProgram(program, built, decision)


def _candidates(available: list[str], asked: Sequence[str] | None) -> list[str]:
    if asked is None:
        return available
    asked = list(asked)
    unknown = [name for name in asked if name not in available]
    if unknown or not asked:
        raise StitchError(f"candidates={asked}: {unknown or 'none'} not among this machine's "
                          f"automatic candidates {available}. Name one or more of those.")
    return [name for name in available if name in asked]


def save_program(program, path: str, format: str | None = None) -> str:
    """``StitchedProgram.save``: lower to the format's backend, then save."""
    chosen = artifact_format(path, format)
    backend = "onnxruntime" if chosen == "onnx" else "aoti"
    try:
        compiled = compile(program, backend)
    except StitchError as e:
        if chosen == "onnx":
            raise ArtifactError(f"cannot write {path} as ONNX: {e}") from e
        raise
    return save_compiled(compiled, path, chosen)
