"""Saving a program or a deployment as ONE artifact file: ``.pt2`` or ``.onnx``.

``compiled.save(path)`` lands here, and ``program.save(path)`` too once
``compile.save_program`` has lowered the program to the format's backend. The format is
``format`` when given, else ``onnx`` for a path ending in ``.onnx``, else ``pt2``.

- ``pt2``: the AOTInductor package (built now unless the deployment is AOTInductor); for a
  deployment whose graph is the regionally lowered one, the program and its compiled
  pieces, each built again with AOTInductor (``regional_artifact``).
- ``onnx``: the graph as ONNX. Unless the deployment already is ONNX Runtime, the
  ``onnxruntime`` backend is built now, which checks every branch side forced, and it is
  checked on the program's examples against the stitched graph before anything is written.
"""

from __future__ import annotations

from ..errors import StitchError
from ..lower import build
from ..pytree_types import op_libraries, spec_types
from .artifact import ArtifactError, save
from .onnx_artifact import save_onnx
from .profile import against_program
from .regional_artifact import save_regional
from .signature import io_signature

FORMATS = ("pt2", "onnx")


def artifact_format(path: str, format: str | None) -> str:
    chosen = format or ("onnx" if str(path).endswith(".onnx") else "pt2")
    if chosen not in FORMATS:
        raise ArtifactError(f"unknown artifact format {chosen!r}; expected one of "
                            f"{', '.join(FORMATS)}")
    return chosen


def save_compiled(compiled, path: str, format: str | None = None) -> str:
    chosen = artifact_format(path, format)
    program = compiled.program
    ep = program.exported_program
    common = dict(example=program.example, decision=compiled.decision.for_artifact(),
                  report=program.report, dynamic_shapes=program.dynamic_shapes,
                  signature=io_signature(ep, program.epilogue.number_inputs),
                  pytree_types=[*spec_types(ep.call_spec.in_spec, ep.call_spec.out_spec),
                                *op_libraries(ep.graph_module)])
    if chosen == "onnx":
        return save_onnx(path, _onnx_graph(compiled, path), program.epilogue, **common)
    if common["decision"].chosen.split("+")[0] == "regional":
        built = compiled._built
        names = ([d.name for d in built.pieces if d.compiled] if built.backend == "regional"
                 else None)  # the model ran in process: every piece is decided again
        return save_regional(path, program, names, program.epilogue, **common)
    return save(path, _aoti_package(compiled), program.epilogue, **common)


def _onnx_graph(compiled, path: str):
    built = compiled._built
    if built.onnx_graph is not None:
        return built.onnx_graph
    program = compiled.program
    try:
        built = build("onnxruntime", program, program.example)
        against_program(built, program, "the ONNX graph (ONNX Runtime)")
    except StitchError as e:
        raise ArtifactError(f"cannot write {path} as ONNX: {e}") from e
    return built.onnx_graph


def _aoti_package(compiled) -> str:
    package = compiled._built.package_path
    if package is not None:
        return package
    program = compiled.program
    try:
        built = build("aoti", program, program.example)
        against_program(built, program, "the AOTInductor graph")
        return built.package_path
    except StitchError:
        raise
    except Exception as e:
        first = (str(e).strip().splitlines() or [""])[0]
        raise ArtifactError(
            f"an artifact holds the graph compiled by AOTInductor, which failed on "
            f"this graph: {type(e).__name__}: {first}. The graph runs in process "
            "(stitch.compile(program, 'eager' or 'auto')), or save it as ONNX "
            "(path ending in .onnx). If the failing part is a branch stitch made exact "
            "through a flag continuation, Settings(flag_continuations=False) guards it "
            "instead (inputs taking the other side are then refused).") from e
