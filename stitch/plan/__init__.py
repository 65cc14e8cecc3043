"""plan: what to do with each break site, recorded as data."""

from .decisions import Action, Decision

__all__ = ["Action", "Decision"]
