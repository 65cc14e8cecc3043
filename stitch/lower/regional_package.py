"""A regionally lowered program as one PT2 archive that loads in a fresh process.

The archive (``torch.export.pt2_archive``) holds the stitched ``ExportedProgram`` as model
``program`` and one AOTInductor model per piece kept compiled (``piece_0``, ``piece_1``...).
Loading rebuilds the split graph from the program exactly as ``regional`` cut it
(``regions`` and ``pieces`` are deterministic: a program saved and loaded gives the same
piece names and code) and puts each AOTInductor piece in its piece's place (``rebuild``)::

    program  ->  .module() -> regions() -> pieces()  ->  submod_1.true_graph_0 := piece_0
                                                         submod_4              := piece_1

Which pieces are compiled: those the deployment compiled (``Built.pieces``), each built
again with AOTInductor (``regional_aoti``) and decided again on the examples' recorded
inputs as ``regional`` decides (``regional_choice.decide``: it must match the piece run
eagerly and be faster), so a piece AOTInductor cannot build, or builds slower, runs as
exported. Each kept piece is listed with the sha256 of its code; ``rebuild`` refuses a
piece whose code differs from it.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..scratch import scratch_file
from .regional import pieces, regions, run_examples
from .regional_aoti import AotiPiece, PieceSignature, aoti_files, export_piece, signature_of
from .regional_choice import PieceDecision, decide, record

PROGRAM = "program"  # the model name of the ExportedProgram in the archive


class PieceMismatch(Exception):
    """The archive's pieces do not fit the graph rebuilt from its program."""


@dataclass(frozen=True)
class RegionalPackage:
    path: str  # the PT2 archive
    pieces: tuple[dict, ...]  # per compiled piece: name, kind, model, code_sha256, signature
    decisions: tuple[PieceDecision, ...]  # each piece asked for, as AOTInductor decided it


def code_sha256(piece: torch.fx.GraphModule) -> str:
    return hashlib.sha256(piece.code.encode()).hexdigest()


def split_program(ep: torch.export.ExportedProgram
                  ) -> tuple[torch.fx.GraphModule, dict[str, tuple]]:
    """``ep``'s module split as ``regional`` splits it, called like the module; its pieces."""
    module = ep.module()
    split, control = regions(module)
    split.graph._codegen = copy.deepcopy(module.graph._codegen)
    split.recompile()
    return split, pieces(split, control)


def package_regional(ep: torch.export.ExportedProgram, examples: Sequence,
                     names: Sequence[str] | None = None) -> RegionalPackage:
    """``ep`` and the pieces named ``names`` (None: every piece) that AOTInductor builds,
    matching and faster on the inputs ``examples`` (``.args``/``.kwargs``) give them, as
    one PT2 archive."""
    from torch.export.pt2_archive._package import package_pt2

    split, found = split_program(ep)
    names = list(found) if names is None else list(names)
    unknown = sorted(set(names) - set(found))
    if unknown:
        raise PieceMismatch(f"no piece named {unknown} in the split graph (its pieces: "
                            f"{sorted(found)})")
    saved = [(v, v.detach().clone()) for v in split.buffers()]

    files, entries, decisions = {}, [], []
    with torch.no_grad():
        calls = record(lambda: run_examples(split, examples), {n: found[n][:2] for n in names})
        for name in names:
            owner, attr, kind = found[name]
            piece = getattr(owner, attr)
            built: dict = {}

            def compiler(module, calls=calls[name], built=built):
                ep_piece = export_piece(module, calls)
                built["signature"], built["files"] = signature_of(ep_piece), aoti_files(ep_piece)
                return AotiPiece(_runner(built["files"]), module, built["signature"])

            decision, runs = decide(name, kind, piece, calls[name], compiler)
            decisions.append(decision)
            if decision.compiled:
                model = f"piece_{len(entries)}"
                files[model] = built["files"]
                entries.append({"name": name, "kind": kind, "model": model,
                                "code_sha256": code_sha256(piece),
                                "signature": built["signature"].to_json()})
        for buffer, value in saved:
            buffer.copy_(value)
    path = scratch_file(".pt2", "regional-")
    package_pt2(path, exported_programs={PROGRAM: ep}, aoti_files=files or None)
    return RegionalPackage(path, tuple(entries), tuple(decisions))


def _runner(files: list):
    """The AOTInductor model in ``files``, loaded (to check and time it before packaging)."""
    from torch._inductor.package import load_package, package_aoti

    path = scratch_file(".pt2", "piece-")
    package_aoti(path, files)
    return load_package(path)


def rebuild(ep: torch.export.ExportedProgram, runners: dict, entries: Sequence[dict]
            ) -> torch.fx.GraphModule:
    """The split graph of ``ep`` with each piece in ``entries`` (``RegionalPackage.pieces``)
    run by its AOTInductor model in ``runners`` (by model name); PieceMismatch where a piece
    is not in the graph, its code differs, or its model is missing."""
    split, found = split_program(ep)
    for entry in entries:
        name, model = entry["name"], entry["model"]
        if name not in found:
            raise PieceMismatch(f"piece {name} is not in the graph rebuilt from the program "
                                f"(its pieces: {sorted(found)})")
        owner, attr, _ = found[name]
        piece = getattr(owner, attr)
        if code_sha256(piece) != entry["code_sha256"]:
            raise PieceMismatch(f"piece {name} rebuilt from the program has other code than "
                                "the piece that was compiled")
        if model not in runners:
            raise PieceMismatch(f"piece {name}'s AOTInductor model {model} is missing (models "
                                f"there: {sorted(runners)})")
        setattr(owner, attr, AotiPiece(runners[model], piece,
                                       PieceSignature.from_json(entry["signature"])))
    return split
