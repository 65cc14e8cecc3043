"""One settings object for the whole pipeline; every field documented, defaults here only."""

from __future__ import annotations

import os
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Settings:
    max_rounds: int = 8
    """Rewrite/re-capture rounds: a rewrite can expose breaks further down (a flag that was a
    Python bool becomes a tensor and reaches the callee's ``if``; Faster R-CNN's batched NMS
    takes four rounds before its box decoding is reached). Rounds stop as soon as a census
    finds nothing new to rewrite."""

    max_traced_breaks: int = 8
    """Breaks found while torch.cond traces a branch no example took (a submodule only that
    branch calls): each is rewritten and the conds tried again, up to this many per export;
    past that, the branch is guarded."""

    rtol: float | None = None
    """Relative tolerance for comparing outputs with eager (None: torch.testing's default)."""

    atol: float | None = None
    """Absolute tolerance for comparing outputs with eager (None: torch.testing's default)."""

    flag_continuations: bool = True
    """An ``if flag:`` that binds names its other side does not, read under later
    ``if flag:`` blocks (Longformer's global attention), takes the rest of the function as
    each branch's continuation, the flag fixed there: one exact cond. False: such an ``if``
    is guarded instead, which needs ``allow_guards=True`` (specialised to the side example 0 takes; other inputs raise
    SpecializationError) — for a graph that must lower where the exact one does not
    (Longformer/LED's exact graphs do not lower to Inductor/AOTInductor on CPU with
    torch 2.14; their guarded ones do)."""

    allow_guards: bool = False
    """A branch stitch can only specialise (torch.cond cannot trace it) is refused at export
    by default, listing each such site, why the cond failed and what to change: a program
    that raises ``SpecializationError`` on inputs the model accepts is never returned unless
    asked for. True: such a branch is specialised to the side example 0 takes, with a
    runtime check that raises ``SpecializationError`` (naming file:line) for inputs taking
    the other side; the report, the artifact's manifest, ``stitch inspect`` and
    ``stitch serve``'s start line list the guards."""

    unchecked_state: tuple[str, ...] = ()
    """Python state the forward changes on every call that the user declares scratch (a
    cache rebuilt before it is read, as RAFT's ``corr_block.corr_pyramid``), by the names
    stitch's refusal gives (``block.cache`` for an attribute of a submodule, ``cache`` on
    the root; ``class:pkg.mod.Model.history`` and the like for state outside the model): the
    program never sets it (torch.export drops it), and stitch neither refuses nor compares
    it. The report lists each one. Outputs are still verified, examples in sequence: state
    declared scratch that a later call reads shows as differing outputs, and is refused.
    Default: none; stitch refuses a forward that changes state it cannot replay."""

    force_branches: bool = True
    """Verify every synthesized branch site (cond or where, at any depth) both ways, forcing
    the predicate where the examples only take one side."""

    checks: str = "auto"
    """Where a data-dependent assert/raise (and a guard) is checked. ``"graph"``: in the
    graph (``torch._assert_async``): it stops the graph where the model would have raised,
    but on CUDA a failure is a device-side assert that ends the process's CUDA context.
    ``"epilogue"``: the graph returns the condition and the epilogue raises the model's
    exception after the graph ran, in order with the other deferred calls (no device
    assert, no host sync in the graph, capturable in a CUDA graph; buffers the forward
    updates after the failing check are updated anyway). ``"auto"``: the epilogue for CUDA
    tensors, the graph for CPU tensors. Checks inside a torch.cond/while_loop body and
    under strict=True stay in the graph."""

    progress: bool = True
    """An export running longer than a few seconds shows, on one line of stderr rewritten
    in place, which stage it is in (stitch/progress.py) — only when stderr is a terminal;
    False (or ``STITCH_PROGRESS=0``) keeps it quiet. The time of each stage is in the
    report's ``seconds`` either way."""

    dump_dir: str | None = field(default_factory=lambda: os.environ.get("STITCH_DEBUG") or None)
    """Write each rewritten function's source (per round and attempt, with the decisions
    as comments) into this folder, and append to its ``messages.log`` what torch said of
    attempts stitch abandoned (kept off stderr; capture/quiet.py):
    ``STITCH_DEBUG=/tmp/stitch-dump`` sets it."""
