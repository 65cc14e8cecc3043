"""Which build of the artifact a server runs, and why (data, printed at start)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..errors import ServeError


@dataclass(frozen=True)
class Variant:
    name: str  # "aoti-cpu", "aoti-cuda", "regional-cpu", "regional-cuda", "onnxruntime-cpu"...
    device: str
    reason: str

    def to_json(self) -> dict:
        return asdict(self)


def choose_variant(manifest: dict, cuda_available: bool) -> Variant:
    devices = {s.get("device", "cpu").split(":")[0] for s in manifest.get("inputs", [])
               if "dtype" in s}
    device = "cuda" if "cuda" in devices else "cpu"
    chosen = (manifest.get("deployment") or {}).get("chosen", "not recorded")
    if manifest.get("runs_with") == "onnxruntime":  # an .onnx artifact
        provider = "CUDA" if device == "cuda" and cuda_available else "CPU"
        return Variant(f"onnxruntime-{provider.lower()}", "cuda" if provider == "CUDA" else "cpu",
                       f"an ONNX artifact: ONNX Runtime's {provider} provider runs it "
                       f"(profiling chose {chosen} on the exporting machine)")
    if manifest.get("runs_with") == "regional":  # the graph run between compiled pieces
        if device == "cuda" and not cuda_available:
            raise ServeError("the artifact was built for CUDA (its inputs are on cuda) but "
                             "torch.cuda.is_available() is False here: serve it on a GPU "
                             "machine, or export on CPU for a CPU server")
        return Variant(f"regional-{device}", device, f"profiling chose {chosen}: the program "
                       "runs as exported between its pieces compiled by AOTInductor")
    if device == "cuda" and not cuda_available:
        raise ServeError("the artifact was built for CUDA (its inputs are on cuda) but "
                         "torch.cuda.is_available() is False here: serve it on a GPU machine, "
                         "or export on CPU for a CPU server")
    if device == "cuda":
        if chosen.startswith("tensorrt"):
            return Variant("aoti-cuda", "cuda", f"profiling chose {chosen}, but artifacts hold "
                           "the AOTInductor build only (TensorRT engines are not saved into "
                           "stitch artifacts yet): serving AOTInductor on CUDA")
        return Variant("aoti-cuda", "cuda", f"the artifact was built for CUDA; profiling "
                       f"chose {chosen}; its ahead-of-time form (AOTInductor) is served")
    why = "there is no GPU here" if not cuda_available else \
        "the artifact was built for CPU (export on the GPU machine for a CUDA variant)"
    return Variant("aoti-cpu", "cpu", f"{why}; profiling chose {chosen} on the exporting "
                   "machine; the artifact's AOTInductor build is served")


def guards_line(manifest: dict) -> str:
    """The start line about guards: none, or each specialised branch (a request taking its
    other side is answered with SpecializationError)."""
    decisions = (manifest.get("report") or {}).get("decisions") or []
    guards = [f"{d['location']}: {d['reason'][:120]}" for d in decisions
              if d.get("action") == "guarded"]
    if not guards:
        return "guards: none (the program accepts every input the model accepts)"
    return (f"guards: {len(guards)} specialised branch(es) (exported with allow_guards=True); "
            "requests taking the other side are answered with SpecializationError: "
            + "; ".join(guards))

