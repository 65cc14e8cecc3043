"""The regional ``.pt2`` artifact: a regionally lowered deployment that loads in a fresh process.

The same ONE zip file as every ``.pt2`` (``artifact``: stitch's manifest with the sha256 of
every entry, the zip comment with the manifest's), holding a PT2 archive instead of one
AOTInductor package (``lower.regional_package``)::

    <name>/models/program.json ...         the stitched ExportedProgram
    <name>/data/aotinductor/piece_0/...    one AOTInductor model per piece kept compiled
    <name>/extra/stitch/manifest.json      "runs_with": "regional"; "pieces": each piece's
                                           name, model, code sha256 and input signature

``load_regional`` runs after ``read_manifest`` has checked every entry: it rebuilds the
split graph from the program, refuses an artifact whose pieces do not fit it, and runs the
control-flow operators and the uncompiled pieces as exported, the compiled pieces with
AOTInductor (a call a piece was not compiled for runs it as exported: ``AotiPiece``).

Limits: CPU and CUDA alike as AOTInductor loads them, but no CUDA-graph replay; the program's
weights are stored once in the program and again in each compiled piece that reads them.
"""

from __future__ import annotations

import torch

from ..errors import StitchError
from ..lower.regional_package import PROGRAM, PieceMismatch, package_regional, rebuild
from .artifact import ArtifactError, save
from .loaded import LoadedProgram
from .profile import against_program

RUNS_WITH = "regional"


class _NoGrad:
    """The rebuilt graph called as a deployment is: without autograd (the whole-graph
    AOTInductor runner records none either)."""

    def __init__(self, module: torch.nn.Module) -> None:
        self.module = module

    def __call__(self, *args, **kwargs):
        with torch.no_grad():
            return self.module(*args, **kwargs)


class _Checked:  # what worst_error takes: a .run
    def __init__(self, run) -> None:
        self.run = run


def save_regional(path: str, program, names, epilogue, **common) -> str:
    """Package the program and its pieces named ``names`` (None: every piece, each decided
    again for AOTInductor), check the package rebuilt against the stitched graph on the
    program's examples, then write the artifact."""
    examples = program.examples or [program.example]
    try:
        package = package_regional(program.exported_program, examples, names)
        run = _NoGrad(rebuild(program.exported_program, _load_archive(package.path)[1],
                              package.pieces))
        against_program(_Checked(run), program, "the regional AOTInductor graph")
    except StitchError:
        raise
    except Exception as e:
        first = (str(e).strip().splitlines() or [""])[0]
        raise ArtifactError(
            f"cannot write {path}: packaging the regionally lowered graph failed: "
            f"{type(e).__name__}: {first}. The deployment runs in process; save it as ONNX "
            "(a path ending in .onnx) or deploy another backend to write an artifact.") from e
    pieces = {"compiled": list(package.pieces),
              "decisions": [str(d) for d in package.decisions]}
    return save(path, package.path, epilogue, runs_with=RUNS_WITH, pieces=pieces, **common)


def _load_archive(path: str):
    """(program, {model name: AOTInductor runner}) from a PT2 archive."""
    from torch.export.pt2_archive._package import load_pt2

    contents = load_pt2(path)
    return contents.exported_programs[PROGRAM], contents.aoti_runners


def load_regional(path: str, manifest: dict, epilogue) -> LoadedProgram:
    """A checked regional artifact (``read_manifest``) loaded: see the module's docstring."""
    entries = (manifest.get("pieces") or {}).get("compiled")
    if entries is None:
        raise ArtifactError(f"{path}: runs_with is {RUNS_WITH!r} but the manifest lists no "
                            "pieces; re-save the deployment with this stitch")
    try:
        program, runners = _load_archive(path)
    except KeyError:
        raise ArtifactError(f"{path}: runs_with is {RUNS_WITH!r} but the archive holds no "
                            f"model {PROGRAM!r}; re-save the deployment with this stitch") from None
    try:
        module = rebuild(program, runners, entries)
    except PieceMismatch as e:
        raise ArtifactError(f"{path}: {e}. The artifact's pieces were cut from another graph "
                            "than its program gives here (made by another stitch or torch?); "
                            "re-save the deployment with this stitch and torch.") from None
    return LoadedProgram(_NoGrad(module), epilogue, manifest, path)
