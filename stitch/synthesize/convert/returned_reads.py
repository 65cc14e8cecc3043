"""A scalar read a function returns is a read in its caller.

``number_ops`` routes the operators on the reads of the function it rewrites, and on the
results of helpers a read is passed to (``number_helpers.py``). A function that makes the
read itself and returns it (``def read(self, t): return int(t.sum())``, called as
``k = self.read(x)``) would hand its caller the 0-d tensor the read is in the program, with
the tensor's operators: ``10 // k`` at 0 would raise torch's ``RuntimeError`` where the
model raises ``ZeroDivisionError``, ``print(n / 3)`` would print ``tensor(0.6667)``, and
``k / 3`` would be float32 where the model's is a double.

So a function whose rewrite returns a read (``RewriteContext.returns_read``, set by
``number_ops``) is a *returner*, and a call of a returner counts as a read in every
function stitch rewrites (``number_helpers.calls_to`` finds the calls by name, as it finds
helpers, and, on the line where a break's call chain went into a returner, a call through
``self`` or a local name: ``self.counter(x)``, a submodule). The callers of a returner on the call chain of each break site (the frames
Dynamo saw) that are not rewritten for breaks of their own are rewritten for their
operators, as a helper a read reaches is (``helper_rewrites.py``); a caller that returns
the read in turn makes its caller one, ``MAX_DEPTH`` frames up. The round repeats its
rewrites until the set of returners stops growing (``round_build.build_round``).

Not followed (the caller keeps the tensor's operators on the result): a caller
on no break site's call chain (a call no example made) unless it is rewritten anyway and
calls the returner by name, a call through another global name or off the chain's line
(``read = self.read``), a decorated returner, a returner called from a nested function or
lambda.
"""

from __future__ import annotations

from capture import BreakSite

from ...errors import StitchError
from ...plan import Action, Decision
from .caller_frames import frame_target, frames_of
from .functions import Target
from .number_helpers import MAX_DEPTH, HelperCall, merge

Key = tuple[str, int]


def read_callers(targets: dict[Key, Target], returners: frozenset[Key], work,
                 round_no: int = 1
                 ) -> tuple[dict[Key, HelperCall], dict[Key, frozenset[int]], list[Decision]]:
    """The callers of ``returners`` on the call chains of the targets' sites: those that
    are not targets themselves as helper calls with no parameters (the read comes back
    from a call), climbing while a caller is a returner too; the lines of each target
    caller where its chain went into a returner; and a decision for each caller frame
    stitch could not find the function of."""
    found: dict[Key, HelperCall] = {}
    lines: dict[Key, frozenset[int]] = {}
    notes: dict[str, Decision] = {}
    for target in targets.values():
        for site in target.sites:
            _climb(site, target, targets, returners, work, (found, lines, notes), round_no)
    return found, lines, list(notes.values())


def _climb(site: BreakSite, target: Target, targets: dict[Key, Target],
           returners: frozenset[Key], work, out, round_no: int) -> None:
    found, lines, notes = out
    frames = frames_of(site)
    at = [i for i, (f, line, _) in enumerate(frames) if f"{f}:{line}" == site.location]
    if not at:
        return
    i, key, name, depth = at[-1], target.key, target.qualname, 1
    while key in returners and i > 0 and depth <= MAX_DEPTH:
        filename, line, function = frames[i - 1]
        try:
            caller = frame_target(filename, line, function, work)
        except StitchError as e:
            notes[f"{filename}:{line}"] = Decision(
                Action.LEFT, f"{filename}:{line}", function,
                f"it calls {name}, which returns a scalar read, and stitch could not find "
                f"its function to rewrite its operators on that read ({e})", round=round_no)
            return
        if caller.key in targets:
            lines[caller.key] = lines.get(caller.key, frozenset()) | {line}
        else:
            merge(found, HelperCall(caller, frozenset(), depth, via=name,
                                    lines=frozenset({line})))
        i, key, name, depth = i - 1, caller.key, caller.qualname, depth + 1
