"""One rewrite round's functions: every target rewritten with everything known so far,
the helpers scalar reads reach, and the callers of functions that return a read
(``returned_reads.py``), until the set of those stops growing. ``rounds.py`` runs the
rounds."""

from __future__ import annotations

import ast
import os

from capture import BreakKind, BreakSite
from capture import torch_messages as tm

from ...errors import StitchError
from ...plan import Action, Decision
from ...settings import Settings
from ..analysis.context import RewriteContext
from ..analysis.origins import ORIGINS, tag_tests
from .caller_frames import returns_to_entry
from .functions import Target, compile_function, parse_function
from .helper_effects import effect_helpers, writing_helpers
from .helper_rewrites import helper_rewrites
from .number_helpers import MAX_DEPTH, merge
from .passes import rewrite
from .returned_reads import read_callers


def build_round(targets, rewrites, dependent, sides, round_no, guard_lines, guard_reason,
                 settings: Settings, kept_loops: dict[str, str], rest_lines: dict[str, str],
                 across=({}, set()), work=None, reached=None):
    """The round's rewrites, decisions and deferred lines. Rewritten again while the
    functions found to return a scalar read grow: their callers' operators on the result
    keep Python's number rules (``returned_reads.py``). ``reached``: helpers a run showed
    reads reaching (``reached_helpers.py``)."""
    returners: frozenset = frozenset()
    call_lines: dict = {}  # target key -> lines where a call chain went into a returner
    refused: dict = {}  # target key -> lines whose call could not pass the rest on
    outputs = _outputs(targets, work, across[0], refused)
    for _ in range(2 * MAX_DEPTH + 3):  # each pass adds a frame of callers at least
        candidate, round_decisions, round_expected, helpers, returning = _rewrite_targets(
            targets, rewrites, dependent, sides, round_no, guard_lines, guard_reason,
            settings, kept_loops, rest_lines, across, (returners, call_lines), outputs,
            refused, reached or {})
        passed = _outputs(targets, work, across[0], refused)
        if passed != outputs:  # a caller kept its rest: the value it returns is no output
            outputs = passed
            continue
        callers, lines, missed = (read_callers(targets, returners | returning, work, round_no)
                                  if work is not None and returners | returning
                                  else ({}, {}, []))
        for call in [*callers.values(), *(reached or {}).values()]:
            merge(helpers, call)
        found, notes, returning_helpers = helper_rewrites(helpers, set(targets), round_no,
                                                          returners | returning)
        grown = returners | returning | returning_helpers
        if grown == returners and lines == call_lines:
            break
        returners, call_lines = frozenset(grown), lines
    else:  # the last pass's rewrites knew fewer returners than it found
        missed.append(Decision(
            Action.LEFT, ", ".join(sorted(f"{f}:{ln}" for f, ln in grown - returners)), "",
            "functions found to return a scalar read after the last rewrite pass: their "
            "callers' operators on the result keep the tensor's rules", round=round_no))
    candidate.update(found)
    return candidate, round_decisions + notes + missed, round_expected


def _outputs(targets, work, rest_calls: dict, refused: dict) -> dict:
    """Target key -> whether what its function returns is what the program returns, at
    every site (``caller_frames.returns_to_entry``), counting only the calls that did pass
    their function's rest on."""
    passing = {key: {ln: callee for ln, callee in calls.items()
                     if ln not in refused.get(key, ())}
               for key, calls in rest_calls.items()}
    return {key: work is not None and bool(t.sites)
            and all(returns_to_entry(s, work, passing) for s in t.sites)
            for key, t in targets.items()}


def _rewrite_targets(targets, rewrites, dependent, sides, round_no, guard_lines, guard_reason,
                     settings: Settings, kept_loops: dict[str, str],
                     rest_lines: dict[str, str], across, reads_back, outputs, refused,
                     reached: dict):
    rest_calls, resumers = across
    returners, call_lines = reads_back
    candidate = dict(rewrites)
    round_decisions: list[Decision] = []
    round_expected: set[str] = set()
    helpers: dict = {}  # helpers scalar reads reach (number_helpers.py)
    returning: set = set()  # targets that return a read (returned_reads.py)
    for key, target in targets.items():
        ctx = RewriteContext(
            filename=target.filename, qualname=target.qualname,
            sites={s.lineno: s for s in target.sites},
            dependent_lines=dependent.get(target.filename, set())
            | {s.lineno for s in target.sites if s.kind in (BreakKind.BRANCH,)},
            round=round_no, sides=sides.get(target.filename, {}),
            force_guard={ln for f, ln in guard_lines if f == target.filename},
            guard_reason=guard_reason, flag_continuations=settings.flag_continuations,
            helpers=effect_helpers(target.base), writers=writing_helpers(target.base),
            kept_loops={int(loc.rsplit(":", 1)[1]): why for loc, why in kept_loops.items()
                        if loc.rsplit(":", 1)[0] == target.filename},
            rest_lines={int(loc.rsplit(":", 1)[1]): why for loc, why in rest_lines.items()
                        if loc.rsplit(":", 1)[0] == target.filename},
            takes_rest=key in resumers, rest_calls=dict(rest_calls.get(key, {})),
            to_outputs=outputs.get(key, False),
            read_returners=returners, read_call_lines=call_lines.get(key, frozenset()),
            read_params=reached[key].params if key in reached else frozenset(),
            module_globals=target.base.__globals__,
            freevars=frozenset(target.base.__code__.co_freevars))
        try:
            func = rewrite(tag_tests(parse_function(target), target.filename), ctx)
            if settings.dump_dir:
                _dump(settings.dump_dir, target, func, ctx, round_no, bool(guard_lines))
            compiled = compile_function(target, func)
            setattr(compiled, ORIGINS, ctx.origins)  # verification forces the model's tests
            candidate[key] = (target, compiled)
        except StitchError as e:
            round_decisions += [left(s, str(e), round_no) for s in target.sites]
            refused[key] = frozenset(rest_calls.get(key, {}))  # kept as written
            continue
        round_decisions += ctx.decisions
        if ctx.rest_refused:
            refused[key] = frozenset(ctx.rest_refused)
        round_expected |= {f"{target.filename}:{ln}" for ln in ctx.deferred_lines}
        for call in ctx.number_helpers.values():
            merge(helpers, call)
        if ctx.returns_read:
            returning.add(key)
    return candidate, round_decisions, round_expected, helpers, returning


def _dump(folder: str, target: Target, func, ctx, round_no: int, guarding: bool) -> None:
    """The rewritten source of one function, its decisions on top (``Settings.dump_dir``)."""
    os.makedirs(folder, exist_ok=True)
    name = f"round{round_no}-{target.qualname}{'-guarding' if guarding else ''}.py"
    head = [f"# {target.filename}: {target.qualname}, round {round_no}"
            + (" (second attempt: failed conds guarded)" if guarding else "")]
    head += [f"# {d.site or '-'} {d.action.value} at line {d.location.rsplit(':', 1)[-1]}: "
             f"{d.reason.splitlines()[0]}" for d in ctx.decisions]
    with open(os.path.join(folder, name), "w") as f:
        f.write("\n".join(head) + "\n\n" + ast.unparse(func) + "\n")


def left(site: BreakSite, reason: str, round_no: int = 1, advice: str = "") -> Decision:
    return Decision(Action.LEFT, site.location, site.function, reason, site.id, round_no,
                    advice)


# the census's advice on the user's own model, which a function stitch rewrote does not take
_CENSUS_ADVICE = ("This is a torch.compile limitation; report it with the census of a "
                  "smaller input, or exclude that example.")


def failed_when_run(error: BaseException, lines: int = 4) -> tuple[str, str]:
    """Why a rewritten function failed when run, and what the user can change (empty: the
    site's own advice), for the decision that leaves its sites: a loop whose body changes a
    carried value's shape said as such (a ``torch.while_loop`` carries one shape per value),
    else the error's first lines, without the census's advice on the user's own model."""
    text = str(error)
    changed = tm.search(tm.WHILE_CARRY_CHANGED, text)
    if changed is not None:
        return ("as a torch.while_loop: the loop's body gives a value it carries another "
                f"shape or layout than it had before the loop ({changed.group(1).strip()}); "
                "a while_loop carries one per value", "keep the value's shape across the "
                "loop's passes (reshape it back, or pad), or run the loop eagerly")
    first = "\n".join(text.replace(_CENSUS_ADVICE, "").strip().splitlines()[:lines])
    return f"{type(error).__name__}: {first}", ""
