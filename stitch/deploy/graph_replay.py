"""A built backend replayed from CUDA graphs, or the reason it cannot be: things a capture
cannot hold (host syncs, conds, buffer updates, ONNX Runtime's host-side feeds) are found in
the exported program before any capture; a capture that fails anyway is refused naming the
backend and the error."""

from __future__ import annotations

from capture.inputs import Example

from ..errors import StitchError
from ..lower import build, predicate
from ..lower.backends import Built
from ..lower.cudagraphs import CudaGraphRunner, capture_blockers, mutated_buffers


def cudagraph_variant(program, base: Built, inputs: list[Example]) -> Built:
    """``base`` replayed from CUDA graphs, captured for every input signature in ``inputs``;
    StitchError saying why when the graph cannot be captured. Conds block capture: for the
    eager and inductor backends, a graph whose conds are all pure is rebuilt with them
    selecting by torch.where (``predicated``) and captured instead."""
    ep = program.exported_program
    blockers = capture_blockers(ep, "cuda")
    if base.backend == "onnxruntime":  # seen on an H100: "Cannot copy between CPU and CUDA"
        blockers.insert(0, "ONNX Runtime runs the graph outside PyTorch's CUDA stream (on the "
                        "CPU provider, or the CUDA provider's own stream, synchronised with "
                        "the host around each run), which a CUDA graph cannot capture")
    mutated = mutated_buffers(ep)
    if mutated:
        blockers.append(f"the graph updates buffers ({', '.join(mutated)}): capturing runs it "
                        "to warm up, which would advance them")
    control = [b for b in blockers if b.startswith("torch.cond ")]
    run, predicated, seconds = base.run, False, base.compile_seconds
    if control and len(control) == len(blockers):
        if base.backend not in ("eager", "inductor"):
            blockers.append(f"its conds could be predicated for eager and inductor only, not "
                            f"{base.backend} (built from the exported program as is)")
        else:
            module, _replaced, kept = predicate.predicate_conds(ep.module())
            if kept:
                blockers.append("a cond cannot be predicated with torch.where: "
                                + "; ".join(kept))
            else:
                rebuilt = build(base.backend, program, inputs[0], module=module)
                run, predicated, seconds = rebuilt.run, True, rebuilt.compile_seconds
    if blockers and not predicated:
        raise StitchError("cannot capture in a CUDA graph: " + "; ".join(blockers))
    runner = CudaGraphRunner(run)
    for ex in inputs:
        try:
            runner.capture(ex.args, ex.kwargs)
        except StitchError:
            raise
        except Exception as e:  # noqa: BLE001 - seen: aoti on an H200, torch 2.11
            first = (str(e).strip().splitlines() or [""])[0][:300]
            raise StitchError(
                f"capturing the {base.backend} graph in a CUDA graph failed: "
                f"{type(e).__name__}: {first}. Something it runs is not capturable (a host "
                f"sync, an allocation or a stream query outside PyTorch's); deploy this "
                f"backend without CUDA graphs (cudagraphs=False)") from e
    note = ("conds predicated with torch.where, " if predicated else "") + "replayed from CUDA graphs"
    return Built(base.backend, runner, seconds, base.package_path, note=note,
                 reset=base.reset if not predicated else None, predicated=predicated)
