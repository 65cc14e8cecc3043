"""Selective deployment by profiling: build candidates, check them, time them, pick one.

A candidate is deployed only if it matches eager (the stitched graph run as is) on every
example and is faster than eager; otherwise eager is deployed. Timings are medians of
interleaved repeated runs (warm-up first; the device synchronised where there is one), so
the candidates see the same machine noise. Compile time is recorded apart.
"""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
import torch.utils._pytree as pytree

from capture.inputs import Example

from ..errors import SpecializationError, StitchError
from ..lower import build
from ..lower.backends import BackendUnavailable, Built
from ..program import original_exception


@dataclass(frozen=True)
class Candidate:
    backend: str
    cudagraphs: bool
    available: bool
    correct: bool
    compile_seconds: float
    median_ms: float | None
    spread_ms: float | None  # interquartile range
    max_abs_error: float | None
    chosen: bool
    reason: str

    @property
    def name(self) -> str:
        return self.backend + ("+cudagraphs" if self.cudagraphs else "")


@dataclass(frozen=True)
class DeploymentDecision:
    chosen: str
    reason: str
    candidates: tuple[Candidate, ...]
    device: str
    threads: int

    def to_json(self) -> dict:
        return {"chosen": self.chosen, "reason": self.reason, "device": self.device,
                "threads": self.threads, "candidates": [asdict(c) for c in self.candidates]}

    @staticmethod
    def from_json(data: dict) -> DeploymentDecision:
        return DeploymentDecision(data["chosen"], data["reason"],
                                  tuple(Candidate(**c) for c in data["candidates"]),
                                  data["device"], data["threads"])

    def __str__(self) -> str:
        from tabulate import tabulate

        rows = [[c.name, "yes" if c.chosen else "", _fmt(c.median_ms), _fmt(c.spread_ms),
                 f"{c.compile_seconds:.1f}", c.reason] for c in self.candidates]
        return (f"deployed: {self.chosen} ({self.reason})\n"
                + tabulate(rows, headers=["candidate", "chosen", "median ms", "IQR ms",
                                          "compile s", "why"]))


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _outputs(run: Callable, ex: Example):
    with torch.no_grad():
        return run(*ex.args, **ex.kwargs)


def _max_error(a, b) -> float:
    worst = 0.0
    for x, y in zip(pytree.tree_leaves(a), pytree.tree_leaves(b), strict=True):
        if isinstance(x, torch.Tensor):
            torch.testing.assert_close(y.cpu(), x.cpu())
            if x.numel() and x.is_floating_point():
                worst = max(worst, (y.cpu().double() - x.cpu().double()).abs().max().item())
    return worst


def _refused(error: BaseException) -> bool:
    """A guard's in-graph check: the program refuses this input by design."""
    return isinstance(original_exception(error), SpecializationError)


def accepted(module, inputs: list[Example]) -> tuple[list[Example], list]:
    """The examples ``module`` (the stitched graph) accepts, with its outputs on them: a
    guarded program refuses inputs that take a specialised-away branch, and those are
    neither compared nor timed. Example 0 is always accepted (the graph was traced on it)."""
    kept, outputs = [], []
    for ex in inputs:
        try:
            outputs.append(_outputs(module, ex))
        except Exception as e:
            if not _refused(e) or not kept:
                raise
            continue
        kept.append(ex)
    return kept, outputs


def select(program, backends: list[str], inputs: list[Example], *, warmup: int = 3,
           repeats: int = 20, cudagraphs: bool | str = "auto",
           builders: dict[str, Callable] | None = None) -> tuple[Built, DeploymentDecision]:
    """Build each backend, check it against eager, time all interleaved, deploy the fastest
    correct one that beats eager (eager otherwise)."""
    built: dict[str, Built] = {}
    notes: dict[str, str] = {}
    for backend in dict.fromkeys(["eager", *backends]):
        try:
            builder = (builders or {}).get(backend, build)
            built[backend] = builder(backend, program, inputs[0])
        except BackendUnavailable as e:
            notes[backend] = f"unavailable: {e}"
        except StitchError:
            raise
        except Exception as e:  # noqa: BLE001 - a candidate that fails to build is reported
            notes[backend] = f"failed to build: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
    # each candidate is a fresh copy: run the examples in the same order on a fresh reference,
    # so stateful graphs (buffer updates) are compared state for state
    reference_module = copy.deepcopy(program.exported_program.module())
    inputs, reference = accepted(reference_module, inputs)
    errors: dict[str, float] = {}
    for name, b in list(built.items()):
        try:
            errors[name] = max(_max_error(ref, _outputs(b.run, ex))
                               for ref, ex in zip(reference, inputs, strict=True))
        except Exception as e:  # noqa: BLE001
            notes[name] = f"wrong results: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
            del built[name]
    times = _time_interleaved(built, inputs[0], warmup, repeats)
    eager_ms = statistics.median(times["eager"])
    best = min(built, key=lambda n: statistics.median(times[n]))
    if statistics.median(times[best]) >= eager_ms:
        best = "eager"
    candidates = []
    for name in dict.fromkeys(["eager", *backends]):
        if name in built:
            med = statistics.median(times[name])
            q = statistics.quantiles(times[name], n=4) if len(times[name]) >= 4 else [med] * 3
            why = ("fastest correct candidate" if name == best and name != "eager"
                   else "baseline; deployed because nothing correct was faster" if name == best
                   else "slower than " + best)
            candidates.append(Candidate(name, False, True, True, built[name].compile_seconds,
                                        med, q[2] - q[0], errors.get(name), name == best, why))
        else:
            candidates.append(Candidate(name, False, False, False, 0.0, None, None, None,
                                        False, notes.get(name, "not built")))
    candidates += _cudagraph_candidates(cudagraphs)
    chosen = built[best]
    if chosen.reset is not None:
        chosen.reset()  # checking and timing advanced its buffers: deploy the exported state
    decision = DeploymentDecision(
        chosen=best,
        reason=(f"{best}: median {statistics.median(times[best]):.3f} ms vs eager "
                f"{eager_ms:.3f} ms" if best != "eager" else "no correct candidate beat eager"),
        candidates=tuple(candidates), device="cuda" if torch.cuda.is_available() else "cpu",
        threads=torch.get_num_threads())
    return chosen, decision


def _cudagraph_candidates(cudagraphs) -> list[Candidate]:
    if cudagraphs is False:
        return []
    if not torch.cuda.is_available():
        return [Candidate("inductor", True, False, False, 0.0, None, None, None, False,
                          "CUDA graphs need a CUDA device; this machine has none")]
    return []


def _time_interleaved(built: dict[str, Built], ex: Example, warmup: int,
                      repeats: int) -> dict[str, list[float]]:
    """Each repeat runs every candidate once, in a freshly shuffled order (seeded): a fixed
    order would always time a candidate right after the same neighbour, whose cache
    footprint then biases it."""
    import random

    times: dict[str, list[float]] = {n: [] for n in built}
    order = list(built)
    shuffle = random.Random(0).shuffle
    with torch.no_grad():
        for _ in range(warmup):
            for b in built.values():
                b.run(*ex.args, **ex.kwargs)
        _sync()
        for _ in range(repeats):
            shuffle(order)
            for name in order:
                b = built[name]
                start = time.perf_counter()
                b.run(*ex.args, **ex.kwargs)
                _sync()
                times[name].append((time.perf_counter() - start) * 1e3)
    return times
