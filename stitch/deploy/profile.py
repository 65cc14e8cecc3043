"""Selective deployment by profiling: build candidates, check them, time them, pick one.

A graph candidate is deployed only if it matches eager (the stitched graph run as is) on
every example and is faster than eager; otherwise eager is deployed. The model itself, run
eagerly with its graph breaks and host syncs (a copy: the user's model is not run), is timed
with them: unless the fastest graph clearly beats it (three of four runs, its upper quartile,
under the model's median: a tie within the noise of microsecond ops is not a gain worth a
risk of being slower), ``stitch.compile`` deploys it in process (what it
computes is the reference the graph was verified against), the decision says so, and
``graph_chosen`` names the fastest graph, which is what an artifact holds. (Seen on an H100:
tiny models whose graphs hold ``torch.cond`` ran faster as the eager model.) Timings are
per input over all the examples the graph accepts, graphs with their epilogue replayed;
medians of interleaved repeated runs (warm-up first; the device synchronised where there is
one), so the candidates see the same machine noise; nothing is printed while timing.
Compile time is recorded apart.
"""

from __future__ import annotations

import copy
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch

from capture.inputs import Example
from capture.isolation import model_copy, rng_state, set_rng_state

from ..errors import SpecializationError, StitchError, VerificationError
from ..lower import build
from ..lower.backends import BackendUnavailable, Built, with_module_reset
from ..lower.compare import max_error
from ..lower.float64 import Float64Reference
from ..number_inputs import model_inputs
from ..running import original_exception
from .graph_replay import cudagraph_variant
from .timing import time_interleaved, with_epilogue


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
    predicated: bool = False  # conds turned into torch.where to make capture possible
    checked: str = ""  # what was checked beyond the examples (onnxruntime: forced sides)

    @property
    def name(self) -> str:
        return (self.backend + ("+where" if self.predicated else "")
                + ("+cudagraphs" if self.cudagraphs else ""))


MODEL = "model"  # the candidate that is the user's model run eagerly (not a graph)


@dataclass(frozen=True)
class DeploymentDecision:
    chosen: str
    reason: str
    candidates: tuple[Candidate, ...]
    device: str
    threads: int
    graph_chosen: str | None = None  # the fastest graph; differs from chosen when "model" won

    @property
    def graph(self) -> str:
        return self.graph_chosen or self.chosen

    def for_artifact(self) -> DeploymentDecision:
        """The decision an artifact records: an artifact holds a graph, never the model."""
        if self.chosen != MODEL:
            return self
        return DeploymentDecision(
            self.graph, f"the fastest graph; in process the eager model deployed ({self.reason})",
            tuple(Candidate(**{**asdict(c), "chosen": c.name == self.graph})
                  for c in self.candidates), self.device, self.threads, self.graph)

    def to_json(self) -> dict:
        return {"chosen": self.chosen, "graph_chosen": self.graph, "reason": self.reason,
                "device": self.device, "threads": self.threads,
                "candidates": [asdict(c) for c in self.candidates]}

    @staticmethod
    def from_json(data: dict) -> DeploymentDecision:
        return DeploymentDecision(data["chosen"], data["reason"],
                                  tuple(Candidate(**c) for c in data["candidates"]),
                                  data["device"], data["threads"], data.get("graph_chosen"))

    def __str__(self) -> str:
        from tabulate import tabulate

        rows = [[c.name, "yes" if c.chosen else "", _fmt(c.median_ms), _fmt(c.spread_ms),
                 f"{c.compile_seconds:.1f}", c.reason] for c in self.candidates]
        return (f"deployed: {self.chosen} ({self.reason})\n"
                + tabulate(rows, headers=["candidate", "chosen", "median ms", "IQR ms",
                                          "compile s", "why"]))


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def run_outputs(run: Callable, ex: Example):
    with torch.no_grad():
        return run(*ex.args, **ex.kwargs)


def _refused(error: BaseException) -> bool:
    """A guard's in-graph check: the program refuses this input by design."""
    return isinstance(original_exception(error), SpecializationError)


def checked_inputs(program, examples: list[Example]) -> list[Example]:
    """The examples a backend is checked on: twice over, in order, when the graph has
    buffers (the program's graph writes them in place, so its signature lists no
    mutation), so a backend that does not carry its state from one call to the next is
    found (AOTInductor in torch 2.14 keeps a 0-d buffer's update for one call only:
    ``self.n += 1`` gave n=1 on every call)."""
    buffers = program.exported_program.graph_signature.buffers
    return [*examples, *examples] if buffers else list(examples)


def accepted(module, inputs: list[Example]) -> tuple[list[Example], list]:
    """The examples ``module`` (the stitched graph) accepts, with its outputs on them: a
    guarded program refuses inputs that take a specialised-away branch, and those are
    neither compared nor timed. Example 0 is always accepted (the graph was traced on it)."""
    kept, outputs = [], []
    for ex in inputs:
        try:
            outputs.append(run_outputs(module, ex))
        except Exception as e:
            if not _refused(e) or not kept:
                raise
            continue
        kept.append(ex)
    return kept, outputs


def against_program(built, program, what: str) -> float:
    """``worst_error`` of ``built`` against the stitched graph, on the program's examples
    the graph accepts (what every artifact's graph is checked by before it is written)."""
    reference = copy.deepcopy(program.exported_program.module())
    examples, expected = accepted(reference, checked_inputs(program, program.examples))
    return worst_error(built, examples, expected, what, float64_reference(program, examples))


def float64_reference(program, examples: list[Example], rng=None) -> Float64Reference:
    """The stitched graph's outputs on ``examples`` run in float64, computed where a build
    differs from it run as is beyond assert_close (``lower/float64.py``)."""
    return Float64Reference(program.exported_program.module, examples,
                            None if rng is None else lambda: set_rng_state(rng))


def worst_error(built, examples, expected, what: str,
                exact: Float64Reference | None = None) -> float:
    """The greatest error of ``built`` over ``examples`` against ``expected``;
    VerificationError naming ``what`` where an output differs (and, given ``exact``, is
    less accurate than eager against the graph run in float64)."""
    worst = 0.0
    half = len(examples) // 2
    again = half > 0 and all(a is b for a, b in zip(examples[:half], examples[half:],
                                                     strict=False))
    for i, (ex, want) in enumerate(zip(examples, expected, strict=True)):
        try:
            worst = max(worst, max_error(want, run_outputs(built.run, ex),
                                         exact and exact.at(i)))
        except AssertionError as e:
            state = (f" on the second run of example {i - half}, after every example ran "
                     "once: it does not carry the graph's buffer updates from one call to "
                     "the next (deploy another backend)" if again and i >= half else "")
            raise VerificationError(f"{what} differs from the stitched graph run eagerly"
                                    f"{state}: {e}") from None
    return worst


def _build_one(backend: str, program, example: Example, builders, built: dict,
               notes: dict) -> bool:
    """``backend``'s candidate into ``built``, or why not into ``notes``."""
    try:
        builder = (builders or {}).get(backend, build)
        built[backend] = builder(backend, program, example)
        return True
    except BackendUnavailable as e:
        notes[backend] = f"unavailable: {e}"
    except VerificationError as e:  # e.g. ONNX wrong on a forced branch side
        notes[backend] = f"wrong results: {e}"
    except StitchError:
        raise
    except Exception as e:  # noqa: BLE001 - a candidate that fails to build is reported
        notes[backend] = f"failed to build: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
    return False


def _check_one(name: str, built: dict, reference, inputs, rng, errors: dict,
               notes: dict, exact: Float64Reference, loose: dict) -> None:
    """``built[name]``'s greatest error against the reference outputs, from the same
    random-number state; a candidate that differs is dropped, the reason noted. One that
    differs beyond assert_close but is as accurate as eager against the graph run in float64
    is kept, what says so in ``loose``."""
    set_rng_state(rng)
    accepted_by: list[str] = []
    try:
        errors[name] = max(max_error(ref, run_outputs(built[name].run, ex), exact.at(i),
                                     accepted_by)
                           for i, (ref, ex) in enumerate(zip(reference, inputs, strict=True)))
    except Exception as e:  # noqa: BLE001
        notes[name] = f"wrong results: {type(e).__name__}: {_first_lines(e)}"
        del built[name]
        return
    if accepted_by:
        loose[name] = ("beyond assert_close's float32 tolerance, as accurate as eager against "
                       f"the graph run in float64 ({accepted_by[0]})")


def _first_lines(error: BaseException) -> str:
    """The first line of an error, and the float64 comparison's (or why there was none)
    where it made one."""
    lines = str(error).splitlines()
    wide = [ln for ln in lines if ln.startswith(("Against the graph run in float64",
                                                  "No yardstick in float64"))]
    return "; ".join([lines[0][:200] if lines else "", *wide])


def select(program, backends: list[str], inputs: list[Example], *, warmup: int = 3,
           repeats: int = 20, cudagraphs: bool | str = "auto",
           builders: dict[str, Callable] | None = None) -> tuple[Built, DeploymentDecision]:
    """Build each backend, check it against eager, time all interleaved, deploy the fastest
    correct one that beats eager (eager otherwise)."""
    built: dict[str, Built] = {}
    notes: dict[str, str] = {}
    asked = list(dict.fromkeys(["eager", *backends]))
    for backend in asked:
        if backend != "regional":  # built below, where inductor gives no correct program
            _build_one(backend, program, inputs[0], builders, built, notes)
    # each candidate is a fresh copy: run the examples in the same order on a fresh reference,
    # so stateful graphs (buffer updates) are compared state for state
    # ... and from the same random-number state (a forward that draws noise, VITS's
    # durations, draws the same noise in each)
    reference_module = copy.deepcopy(program.exported_program.module())
    rng = rng_state()
    inputs, reference = accepted(reference_module, checked_inputs(program, inputs))
    exact = float64_reference(program, inputs, rng)
    errors: dict[str, float] = {}
    loose: dict[str, str] = {}
    for name in list(built):
        _check_one(name, built, reference, inputs, rng, errors, notes, exact, loose)
    if "regional" in asked:
        if "inductor" in built:  # only where the whole graph does not compile, or is wrong
            notes["regional"] = "not built: inductor compiles the whole graph correctly"
        elif _build_one("regional", program, inputs[0], builders, built, notes):
            _check_one("regional", built, reference, inputs, rng, errors, notes, exact, loose)
    variants = []
    if cudagraphs is not False and torch.cuda.is_available():
        for name in list(built):
            try:
                variant = cudagraph_variant(program, built[name], inputs)
                key = name + ("+where" if variant.predicated else "") + "+cudagraphs"
                built[key] = variant
                variants.append(key)
                set_rng_state(rng)
                errors[key] = max(max_error(ref, run_outputs(variant.run, ex), exact.at(i))
                                  for i, (ref, ex) in enumerate(zip(reference, inputs,
                                                                    strict=True)))
            except Exception as e:  # noqa: BLE001 - recorded as the candidate's reason
                key = name + "+cudagraphs"
                built.pop(key, None)
                for k in (name + "+where+cudagraphs",):
                    if k in built:  # captured but wrong: reported under its own name
                        del built[k]
                        key = k
                notes[key] = (str(e) if isinstance(e, StitchError) else
                              f"failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
                if key not in variants:
                    variants.append(key)
    model = _model_candidate(program)
    if model is not None:
        built[MODEL] = model
    runs = {n: b.run if n == MODEL else with_epilogue(b.run, program.epilogue)
            for n, b in built.items()}
    if "eager" not in built:
        raise StitchError(
            "stitch.compile: the exported program itself, run eagerly, could not be built "
            f"or does not reproduce its own outputs ({notes.get('eager', 'no reason given')}); "
            "nothing can be compared against it. Run the program (it is verified) or "
            "report this.")
    times = time_interleaved(runs, inputs, warmup, repeats)
    eager_ms = statistics.median(times["eager"])
    graphs = [n for n in built if n != MODEL]
    graph_best = min(graphs, key=lambda n: statistics.median(times[n]))
    if statistics.median(times[graph_best]) >= eager_ms:
        graph_best = "eager"
    best = graph_best
    if model is not None and not clearly_faster(times[best], times[MODEL]):
        best = MODEL
    candidates = []
    for name in dict.fromkeys(["eager", *backends, *variants, *([MODEL] if model else [])]):
        backend, graphs_on, where = (name.split("+")[0], name.endswith("+cudagraphs"),
                                     "+where" in name)
        if name in built:
            med = statistics.median(times[name])
            q = statistics.quantiles(times[name], n=4) if len(times[name]) >= 4 else [med] * 3
            candidates.append(Candidate(backend, graphs_on, True, True,
                                        built[name].compile_seconds, med, q[2] - q[0],
                                        errors.get(name), name == best,
                                        _why(name, best, graph_best), where,
                                        _checked(built[name], loose.get(name))))
        else:
            candidates.append(Candidate(backend, graphs_on, False, False, 0.0, None, None, None,
                                        False, notes.get(name, "not built"), where))
    candidates += _cudagraph_candidates(cudagraphs)
    chosen = built[best]
    if chosen.reset is not None:
        chosen.reset()  # checking and timing advanced its buffers: deploy the exported state
    med = {n: statistics.median(t) for n, t in times.items()}
    if best == MODEL:
        reason = (f"the eager model ({med[MODEL]:.3f} ms): no graph clearly beat it (fastest: "
                  f"{graph_best}, {med[graph_best]:.3f} ms; a graph deploys where three of its "
                  f"runs in four are under the model's median): deployed in process; an "
                  f"artifact holds {graph_best}")
    elif best != "eager":
        reason = f"{best}: median {med[best]:.3f} ms vs eager {eager_ms:.3f} ms"
    else:
        reason = "no correct candidate beat eager"
    if model is not None and best != MODEL:
        reason += f" (the eager model: {med[MODEL]:.3f} ms)"
    decision = DeploymentDecision(
        chosen=best, reason=reason, candidates=tuple(candidates),
        device="cuda" if torch.cuda.is_available() else "cpu",
        threads=torch.get_num_threads(), graph_chosen=graph_best)
    return chosen, decision


def clearly_faster(times: list[float], than: list[float]) -> bool:
    """Three of four runs in ``times`` (its upper quartile) under the median of ``than``."""
    upper = statistics.quantiles(times, n=4)[2] if len(times) >= 4 else max(times)
    return upper < statistics.median(than)


def _checked(built: Built, loose: str | None = None) -> str:
    return "; ".join(x for x in (built.note, loose) if x)


def _why(name: str, best: str, graph_best: str) -> str:
    if name == MODEL:
        return ("the model run eagerly (breaks and host syncs included): "
                + ("no graph clearly faster" if name == best else "reference, slower than "
                   + best))
    if name == best:
        return ("fastest correct candidate" if name != "eager"
                else "baseline; deployed because nothing correct was faster")
    if name == graph_best:
        return "fastest graph (what an artifact holds); not clearly faster than the eager model"
    return "slower than " + best


def _model_candidate(program) -> Built | None:
    """The user's model, run eagerly, as a timed candidate: a copy (timing runs it many times,
    and the user's model is never changed), with buffers reset after timing like the graphs'.
    None when the program does not know its model (loaded, or built by hand) or when the
    model appends to list attributes (the deployed graph appends to the user's model's)."""
    model = getattr(program, "model", None)
    if model is None or program.epilogue.append_targets or program.epilogue.rebind_targets \
            or program.epilogue.counter_targets:
        return None  # a copy would append to (or set) its own state, not the model's
    copied = model_copy(model)
    numbers = program.epilogue.number_inputs
    run = copied if not numbers else _with_numbers(copied, numbers)
    return with_module_reset(Built(MODEL, run, 0.0, note="the model, eagerly",
                                   as_called=copied), copied)


def _with_numbers(model: torch.nn.Module, numbers) -> Callable:
    """The model run on the graph's inputs: the numbers the graph takes as 0-d tensors
    given back to it as Python numbers (number_inputs.py)."""
    def run(*args, **kwargs):
        args, kwargs = model_inputs(numbers, args, kwargs)
        return model(*args, **kwargs)
    return run


def _cudagraph_candidates(cudagraphs) -> list[Candidate]:
    if cudagraphs is False:
        return []
    if not torch.cuda.is_available():
        return [Candidate("inductor", True, False, False, 0.0, None, None, None, False,
                          "CUDA graphs need a CUDA device; this machine has none")]
    return []
