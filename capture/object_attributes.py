"""Attributes of a plain object held in Python state (a module global, a class attribute,
a closure cell) that the forward changes: found by comparing fingerprints
(``readings.fingerprint(..., objects=True)`` reads a user object's attributes), located at
the statement that sets the attribute, and refused — stitch replays no attribute of a plain
object, and torch.export records none::

    TRACK = Tracker()
    TRACK.n = TRACK.n + 1            -> refused: model.py:12: forward mutates module global
                                        model.TRACK (sets attribute 'n' of the Tracker ...)
    type(self).tracker.n += 1        -> refused likewise, naming class attribute M.tracker
"""

from __future__ import annotations

from collections.abc import Callable


def changed_attributes(before, after) -> list[str]:
    """The attributes two fingerprints of the same user object differ in; [] when they are
    not both such readings of one object (rebound, or no attributes read)."""
    if not (isinstance(before, tuple) and isinstance(after, tuple) and len(before) == 3
            and len(after) == 3 and before[0] == after[0] == "object"
            and before[1] == after[1]):
        return []
    old, new = dict(before[2]), dict(after[2])
    return sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))


def where_set(locator: Callable[[str], str], attributes: list[str], fallback: str) -> str:
    """file:line of the first statement changing one of the attributes (``locator(name)``
    finds ``TRACK.n = ...``, ``.tracker.n += 1``), else ``fallback``."""
    for attribute in attributes:
        found = locator(attribute)
        if found.rpartition(":")[2].isdigit():
            return found
    return fallback


def note(value, attributes: list[str]) -> str:
    """Why it is refused, and what to do instead."""
    names = ", ".join(repr(a) for a in attributes)
    return (f"sets attribute(s) {names} of the {type(value).__name__} object it holds: "
            "stitch replays no attribute of a plain object, and the exported program "
            "would never set it; keep the value in a buffer of the model "
            "(register_buffer, updated in place) or return it")
