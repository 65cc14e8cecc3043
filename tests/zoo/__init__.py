"""The pattern zoo: small models, each breaking under torch.compile in one known way.

Every line where Dynamo breaks carries a ``# BREAK: <kind>`` comment, so tests can check a
census against the source itself. ``CASES`` maps a name to a factory that returns
``(model, args, kwargs)`` and further ``examples`` that drive the other side of each branch.
"""

from __future__ import annotations

from .cases import CASES, Case, make

__all__ = ["CASES", "Case", "make"]


def __getattr__(name: str):
    """``tests.zoo:<case>`` is a factory for the CLI: ``stitch explain tests.zoo:print_stats``."""
    if name in CASES:
        return lambda: make(name)
    raise AttributeError(f"module 'tests.zoo' has no attribute {name!r}")
