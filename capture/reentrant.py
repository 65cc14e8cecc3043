"""Attributes of torch replaced while stitch traces, re-entrantly: the first user in saves
and replaces them, the last user out puts them back (capture/tracing_fixes.py's fixes)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator


class Reentrant:
    """One fix's patch: ``with patch.active((owner, name, value), ...):`` replaces each
    ``owner.name`` while any user is inside; ``depth`` says how many are."""

    def __init__(self, on_last_exit: Callable[[], None] | None = None) -> None:
        self.depth = 0
        self._saved: list[tuple[object, str, object]] = []
        self._on_last_exit = on_last_exit

    @contextlib.contextmanager
    def active(self, *replacements: tuple[object, str, object]) -> Iterator[None]:
        if not self.depth:
            self._saved = [(owner, name, _raw(owner, name)) for owner, name, _ in replacements]
        self.depth += 1
        for owner, name, value in replacements:
            setattr(owner, name, value)
        try:
            yield
        finally:
            self.depth -= 1
            if not self.depth:
                for owner, name, value in self._saved:
                    setattr(owner, name, value)
                if self._on_last_exit is not None:
                    self._on_last_exit()


def _raw(owner: object, name: str) -> object:
    """``owner.name`` as stored: from a class's own dict where it is defined there, so a
    classmethod or staticmethod is put back as one (``getattr`` would give a bound method)."""
    if isinstance(owner, type) and name in vars(owner):
        return vars(owner)[name]
    return getattr(owner, name)
