"""Where in the source a forward changes a piece of state: the likeliest line, for the
messages that refuse it."""

from __future__ import annotations

import contextlib
import inspect
import re

from .reachable import Slot, SlotKind

_MUTATORS = r"append|extend|insert|pop|remove|clear|update|setdefault|add|discard|popitem"


def locate_slot(slot: Slot, attribute: str = "") -> str:
    """Where a slot is likely mutated, in the file of its class, module or function: for a
    class attribute, within that class's own lines first (another class in the file may
    mutate an attribute of the same name). ``attribute``: where that attribute of the
    object it holds is set instead (``tracker.n += 1``)."""
    within = None
    if slot.kind == SlotKind.CLASS:
        with contextlib.suppress(OSError, TypeError):
            source, start = inspect.getsourcelines(slot.holder)
            within = (start, start + len(source) - 1)
    return locate(slot.file or None, f"{slot.name}.{attribute}" if attribute else slot.name,
                   "member" if slot.kind == SlotKind.CLASS else False, within)


def locate_in_class(owner, name: str) -> str:
    """Where the class of ``owner`` (a module) likely changes its attribute ``name``: within
    that class's own lines first (another class in the file may set an attribute of the
    same name), then the rest of its file."""
    try:
        file = inspect.getsourcefile(type(owner))
        source, start = inspect.getsourcelines(type(owner))
    except (TypeError, OSError):
        return "<unknown>"
    return locate(file, name, True, (start, start + len(source) - 1))


def locate(file: str | None, name: str, attribute: bool | str,
            within: tuple[int, int] | None = None) -> str:
    """file:line of the likeliest mutating statement: augmented assignments and item
    assignments first, then mutating method calls, then indented plain assignments outside
    ``__init__`` (not the module-level binding), and last ``global`` statements; lines
    ``within`` (first, last) are searched before the rest of the file."""
    if not file:
        return "<unknown>"
    target = (rf"\.{re.escape(name)}" if attribute == "member"
              else rf"self\.{re.escape(name)}" if attribute else rf"(?<![\w.]){re.escape(name)}")
    patterns = [rf"{target}\s*(\[[^\]]*\]\s*)?(\+|-|\*|/|//|%|\||&)=",
                rf"{target}\s*\[[^\]]*\]\s*=(?!=)",
                rf"{target}(\[[^\]]*\])?\.({_MUTATORS})\(",
                rf"^\s+{target}\s*=(?!=)",
                *([] if attribute else [rf"^\s*global\s+.*\b{re.escape(name)}\b"]),
                # set by name: setattr(self, "name", ...), vars(self).update(name=...),
                # self.__dict__["name"] = ...
                *([rf"setattr\(\s*\w+\s*,\s*[\"']{re.escape(name)}[\"']",
                   rf"(vars\(\w+\)|__dict__)\.update\(.*\b{re.escape(name)}\s*=(?!=)",
                   rf"__dict__\[\s*[\"']{re.escape(name)}[\"']\s*\]\s*=(?!=)"]
                  if attribute is True else [])]
    try:
        with open(file) as f:
            lines = f.readlines()
    except OSError:
        return file
    functions, current = [], None
    for line in lines:
        match = re.match(r"\s*(?:async\s+)?def\s+(\w+)", line)
        current = match.group(1) if match else current
        functions.append(current)
    for first, last in ([within] if within else []) + [(1, len(lines))]:
        for pattern in patterns:
            for i in range(max(first, 1), min(last, len(lines)) + 1):
                line = lines[i - 1]
                if line.lstrip().startswith("#") or not re.search(pattern, line):
                    continue
                if pattern == patterns[3] and functions[i - 1] == "__init__":
                    continue
                return f"{file}:{i}"
    return file
