"""Which pieces of a regionally lowered graph run compiled, each decided on the examples.

A piece is a straight-line region of the split graph, a cond's arm, or a while_loop's test
or body (``regional.pieces``). The examples run through the split graph eagerly once, each
piece's inputs recorded on the way (``record``); then each reached piece is compiled by
Inductor (``fullgraph=True``, automatic dynamic shapes: the recorded inputs' sizes are
compiled for here, not on a request), run on its recorded inputs against itself run eagerly,
and timed against it interleaved (``decide``)::

    piece            reached  compiled == eager  compiled ms < 0.95 x eager ms  ->  runs
    submod_0         yes      yes                no (9 tiny ops)                     eagerly
    submod_1.true_0  yes      yes                yes (a fused chain)                 compiled
    submod_1.false_0 no       -                  -                                   eagerly

A piece runs compiled only where that is faster (a compiled piece costs a guard check and a
runtime wrapper per call, tens of microseconds, and Inductor parallelises loops over sizes
read from data as if they were large: on tiny tensors and a busy machine its OpenMP team
waits for a descheduled thread, milliseconds a call). A piece no example reaches runs as
exported: nothing could check it compiled, and run as exported it is the stitched graph,
which ``stitch.export`` verified on both sides of every cond. Each decision is a
``PieceDecision`` with its reason and timings.
"""

from __future__ import annotations

import enum
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.utils._pytree as pytree

from .compare import max_error
from .regional_hints import hinted

CALLS_KEPT = 16  # inputs recorded per piece: a loop body runs once per trip
MARGIN = 0.95  # a compiled piece must be at least 5% faster (a tie runs as exported)
TIMING_BUDGET_S = 0.5  # per piece, both sides together, after one warm-up each


class PieceReason(enum.Enum):
    FASTER = "compiled: faster than run eagerly on the examples' inputs"
    NOT_FASTER = "run as exported: compiled, it was not faster"
    NOT_REACHED = "run as exported: no example reaches it, so it could not be checked compiled"
    FAILED = "run as exported: Inductor could not compile it"
    DIFFERS = "run as exported: compiled, it differs from the piece run eagerly"


@dataclass(frozen=True)
class PieceDecision:
    name: str  # "submod_0", "submod_1.true_graph_0"
    kind: str  # "region", "cond arm", "loop test", "loop body"
    reason: PieceReason
    eager_ms: float | None = None  # per call, median over the recorded inputs
    compiled_ms: float | None = None
    detail: str = ""  # the compile error or the difference, first line

    @property
    def compiled(self) -> bool:
        return self.reason is PieceReason.FASTER

    def __str__(self) -> str:
        times = ("" if self.eager_ms is None or self.compiled_ms is None else
                 f" ({self.compiled_ms:.3f} ms compiled vs {self.eager_ms:.3f} ms eager)")
        return f"{self.kind} {self.name}: {self.reason.value}{times}" + (
            f": {self.detail}" if self.detail else "")


class _Recorder(torch.nn.Module):
    """``piece`` as it is, its inputs kept (cloned: later pieces may write them) per call."""

    def __init__(self, piece: torch.nn.Module, calls: list) -> None:
        super().__init__()
        self.piece, self.calls = piece, calls

    def forward(self, *args):
        if len(self.calls) < CALLS_KEPT:
            self.calls.append(pytree.tree_map_only(torch.Tensor, lambda t: t.clone(), args))
        return self.piece(*args)


def record(run: Callable[[], None], pieces: dict[str, tuple[torch.nn.Module, str]]
           ) -> dict[str, list]:
    """Each piece's inputs while ``run()`` runs the examples: ``pieces`` maps a piece's
    name to (its owner, its attribute); every piece is put back after."""
    calls: dict[str, list] = {name: [] for name in pieces}
    originals = {name: getattr(owner, attr) for name, (owner, attr) in pieces.items()}
    try:
        for name, (owner, attr) in pieces.items():
            setattr(owner, attr, _Recorder(originals[name], calls[name]))
        run()
    finally:
        for name, (owner, attr) in pieces.items():
            setattr(owner, attr, originals[name])
    return calls


def _same(a, b) -> None:
    """AssertionError where two outputs differ: tensors by ``max_error``, numbers exactly."""
    max_error(a, b)
    for x, y in zip(pytree.tree_leaves(a), pytree.tree_leaves(b), strict=True):
        if not isinstance(x, torch.Tensor) and x != y:
            raise AssertionError(f"{y!r} where run eagerly it is {x!r}")


def _run_all(piece: Callable, calls: list) -> list:
    return [piece(*args) for args in calls]


def _timed(eager: Callable, compiled: Callable, calls: list) -> tuple[float, float]:
    """Median ms per call of each, timed interleaved over the recorded inputs."""
    times: tuple[list[float], list[float]] = ([], [])
    deadline = time.perf_counter() + TIMING_BUDGET_S
    while len(times[0]) < 5 or (time.perf_counter() < deadline and len(times[0]) < 25):
        for piece, kept in zip((eager, compiled), times, strict=True):
            start = time.perf_counter()
            _run_all(piece, calls)
            kept.append((time.perf_counter() - start) * 1e3 / len(calls))
    return statistics.median(times[0]), statistics.median(times[1])


def decide(name: str, kind: str, piece: Callable, calls: list,
           compiler: Callable = lambda m: torch.compile(m, fullgraph=True)
           ) -> tuple[PieceDecision, Callable]:
    """The decision for one piece and what is to run in its place (``piece`` itself unless
    its compiled form is kept)."""
    if not calls:
        return PieceDecision(name, kind, PieceReason.NOT_REACHED), piece
    rng = torch.random.get_rng_state()
    want = _run_all(piece, calls)
    try:
        torch.random.set_rng_state(rng)
        compiled, got = _compiled(piece, calls, compiler)
    except Exception as e:  # noqa: BLE001 - recorded as the piece's reason
        return PieceDecision(name, kind, PieceReason.FAILED,
                             detail=f"{type(e).__name__}: {_first_line(e)}"), piece
    try:
        for a, b in zip(want, got, strict=True):
            _same(a, b)
    except AssertionError as e:
        return PieceDecision(name, kind, PieceReason.DIFFERS, detail=_first_line(e)), piece
    eager_ms, compiled_ms = _timed(piece, compiled, calls)
    kept = compiled_ms < MARGIN * eager_ms
    return (PieceDecision(name, kind, PieceReason.FASTER if kept else PieceReason.NOT_FASTER,
                          eager_ms, compiled_ms), compiled if kept else piece)


def _compiled(piece, calls: list, compiler: Callable) -> tuple[Callable, list]:
    """``piece`` compiled, and its outputs on ``calls`` (it compiles here, for every recorded
    size): with its integer reads hinted (``regional_hints``) where Dynamo takes the hints,
    as it is where it does not (a read of an input that Dynamo specialised is backed, and
    refuses a hint)."""
    if isinstance(piece, torch.fx.GraphModule):
        with_hints = hinted(piece, calls)
        if with_hints is not piece:
            rng = torch.random.get_rng_state()
            try:
                compiled = compiler(with_hints)
                return compiled, _run_all(compiled, calls)
            except Exception:  # noqa: BLE001 - compiled without the hints below
                torch.random.set_rng_state(rng)
    compiled = compiler(piece)
    return compiled, _run_all(compiled, calls)


def _first_line(error: BaseException) -> str:
    lines = [ln.strip() for ln in str(error).splitlines() if ln.strip()]
    return (lines[0] if lines else "")[:200]
