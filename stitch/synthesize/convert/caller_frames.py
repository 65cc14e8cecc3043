"""Which caller takes the rest next: climbing a failing cond's call chain, one frame a try.

A cond that still fails with the rest of its function in each arm (its sides give a
returned name values of different kinds) hands the rest of the function that called it to
its arms (``caller_continuation.py``). Each try lifts one more frame of the site's call
chain, innermost first: the caller becomes a rewrite target whose call statement passes
its rest, and the callee returns through it. Nothing is lifted past the chain's first
frame (the frame torch.compile entered), and a frame stitch cannot find the function of
ends the climb: the branch then stays refused (or guarded on request), as before.
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import replace

from capture import BreakKind, BreakSite

from ...errors import StitchError
from ...plan import Action, Decision
from ..analysis.names import walk_local
from .caller_continuation import FOLLOW, called_name
from .functions import Target, find_target, parse_function


def lift_callers(failing: list[BreakSite], rest_lines: dict[str, str], work,
                 targets: dict[tuple[str, int], Target],
                 rest_calls: dict[tuple[str, int], dict[int, str]],
                 resumers: set[tuple[str, int]]) -> bool:
    """Lift the next caller frame of each failed cond (``failing``: its site, with the call
    chain) that already had its function's rest; True when one was lifted (the round is
    tried again)."""
    lifted = False
    for site in failing:
        if site.location in rest_lines:
            lifted |= _lift_next(site, work, targets, rest_calls, resumers)
    return lifted


def returns_to_entry(site: BreakSite, work, rest_calls: dict) -> bool:
    """What the function holding ``site`` returns is what the frame torch.compile entered
    returns: it is that frame, or every frame above it passes the rest of itself down
    (``rest_calls``) or returns the call's value as it is (``return inner(h)``), so a value
    returned there is an output of the program."""
    frames = frames_of(site)
    at = [i for i, (f, ln, _) in enumerate(frames) if f"{f}:{ln}" == site.location]
    upper = at[-1] if at else len(frames) - 1
    for i, (filename, line, function) in enumerate(frames[:upper]):
        try:
            caller = frame_target(filename, line, function, work)
            callee = frames[i + 1][2].rsplit(".", 1)[-1]
            if line not in rest_calls.get(caller.key, {}) and \
                    not _returns_the_call(parse_function(caller), line, callee):
                return False
        except StitchError:
            return False
    return True


def _returns_the_call(func, line: int, callee: str) -> bool:
    """The statement at ``line`` is ``return callee(...)``: the caller hands the value on.
    A module's ``forward`` is called through the module (``self.inner(h)``): there the
    returned call must be the only call of the statement."""
    for node in walk_local(func.body):
        if not (isinstance(node, ast.Return) and isinstance(node.value, ast.Call)
                and node.lineno <= line <= (node.end_lineno or node.lineno)):
            continue
        if called_name(node.value) == callee:
            return True
        calls = [c for c in ast.walk(node.value) if isinstance(c, ast.Call)]
        return callee == "forward" and len(calls) == 1
    return False


def frames_of(site: BreakSite) -> list[tuple[str, int, str]]:
    """(filename, line, qualified function) of each frame of the site's call chain."""
    out = []
    for entry in site.call_chain:
        where, _, function = entry.rpartition(" in ")
        filename, _, line = where.rpartition(":")
        if filename and line.isdigit():
            out.append((filename, int(line), function))
    return out


def _lift_next(site: BreakSite, work, targets, rest_calls, resumers) -> bool:
    frames = frames_of(site)
    at = [i for i, (f, ln, _) in enumerate(frames) if f"{f}:{ln}" == site.location]
    if not at:
        return False
    for i in range(at[-1] - 1, -1, -1):
        filename, line, function = frames[i]
        callee = frames[i + 1]
        try:
            caller = frame_target(filename, line, function, work)
            called = frame_target(callee[0], callee[1], callee[2], work)
        except StitchError:
            return False
        calls = rest_calls.setdefault(caller.key, {})
        if line in calls:
            continue  # this frame already passes its rest: climb further
        if not _plain(called):
            # a decorator around the callee (a context manager, autocast, no_grad) would
            # wrap the caller's rest too, once the callee returns through it
            return False
        calls[line] = callee[2].rsplit(".", 1)[-1]
        targets.setdefault(caller.key, caller)
        targets.setdefault(called.key, called)
        resumers.add(called.key)
        return True
    return False


def _plain(target: Target) -> bool:
    """The callee is called as itself: no wrapper between the caller and its code."""
    raw = target.raw
    func = raw.__func__ if isinstance(raw, staticmethod | classmethod) else raw
    return target.cell is None and inspect.unwrap(func) is func


def frame_target(filename: str, line: int, function: str, work) -> Target:
    """The function of a call-chain frame, as a rewrite target with no sites."""
    frame = BreakSite(id="C", kind=BreakKind.BRANCH, rule="caller", gb_type="", reason="",
                      filename=filename, lineno=line, source_line="", function=function)
    found = find_target(owned(frame, work), work)
    return replace(found, sites=[])


def owned(site: BreakSite, work) -> BreakSite:
    """``site`` with the module paths whose class defines its function (for find_target)."""
    owner = site.function.rsplit(".", 1)[0]
    paths = tuple(path for path, module in work.named_modules()
                  if any(c.__qualname__ == owner for c in type(module).__mro__))
    return replace(site, module_paths=paths, module_path=paths[0] if paths else "")


def rest_or_caller(failing: BreakSite, decisions: list[Decision], rest_lines, work,
                    targets, rest_calls, resumers) -> bool:
    """A cond of this round that failed to trace (the census raised): its ``if`` takes the
    rest of its function into each arm on the next attempt, or, when it already did, the
    rest of its caller (``caller_frames``). False when neither is left to try."""
    made = {d.location for d in decisions if d.action == Action.COND}
    if failing.location not in made:
        return False
    if failing.location not in rest_lines:
        rest_lines[failing.location] = failing.reason
        return True
    return lift_callers([failing], rest_lines, work, targets, rest_calls, resumers)


def no_caller_rest(decisions: list[Decision]) -> str:
    """Why a caller's rest could not follow a callee's return (``caller_continuation``)."""
    why = [d.reason for d in decisions if d.action == Action.LEFT and FOLLOW in d.reason]
    return f"; {'; '.join(why)}" if why else ""
