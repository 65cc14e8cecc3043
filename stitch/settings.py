"""One settings object for the whole pipeline; every field documented, defaults here only."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Settings:
    max_rounds: int = 4
    """Rewrite/re-capture rounds: a rewrite can expose breaks further down (a flag that was a
    Python bool becomes a tensor and reaches the callee's ``if``)."""

    rtol: float | None = None
    """Relative tolerance for comparing outputs with eager (None: torch.testing's default)."""

    atol: float | None = None
    """Absolute tolerance for comparing outputs with eager (None: torch.testing's default)."""

    force_branches: bool = True
    """Verify every synthesized branch site (cond or where, at any depth) both ways, forcing
    the predicate where the examples only take one side."""
