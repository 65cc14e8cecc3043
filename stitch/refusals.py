"""What a refusal says: for every break left, why it was not rewritten and what the user
can do (``UnfixableBreaksError``), and for guarded branches why each could only be
specialised (``GuardsRefusedError``)."""

from __future__ import annotations

import ast

from capture import BreakKind, BreakSite
from capture.source import parse_file

from .plan import Action, Decision
from .synthesize.convert.rounds import cond_failure, left, rewritable

COND_HINT = ("make both sides of the `if` give the same names, as tensors of one rank and "
             "dtype (torch.cond's rule), or accept a program specialised to one side with "
             "stitch.Settings(allow_guards=True)")


def why_left(remaining: list[BreakSite], decisions: list[Decision], last_round: bool,
             max_rounds: int) -> list[Decision]:
    """A ``left`` decision for each break left that has none yet: torch.cond's own reason
    where a rewritten branch's cond failed, the round limit where the last census found a
    site no round was left to rewrite, else no rewrite for its kind."""
    out = [left(s, f"torch.cond over both branches failed to trace ({why})")
           for s in remaining if (why := cond_failure(s)) is not None]

    def decided(s: BreakSite) -> bool:
        return any(d.location == s.location for d in (*decisions, *out))

    if last_round:
        out += [left(s, f"found by the census after the last rewrite round "
                        f"(Settings.max_rounds={max_rounds}); raise it")
                for s in remaining if rewritable(s) and not decided(s)]
    return out + [left(s, FORMS[form][0] if (form := _form(s)) else
                       "no rewrite for this kind of break") for s in remaining
                  if not decided(s)]


# a break's Python form stitch has no rewrite for: (why not rewritten, what the user can do)
FORMS: dict[str, tuple[str, str]] = {
    "comprehension filter": (
        "the test filters a comprehension: the list it builds has as many elements as the "
        "data lets through, a length no graph can hold",
        "keep every element and mask the ones the test drops (`torch.where(keep[:, None], "
        "x, 0)`, a sum with a mask), or select with a boolean mask (`x[keep]`, a "
        "data-dependent size torch.export keeps as an unbacked size)"),
    "conditional expression": (
        "the test sits in a conditional expression (`a if test else b`) inside a larger "
        "expression, which stitch does not rewrite",
        "write it as an `if` statement binding a name, or as `torch.where(test, a, b)` when "
        "both sides are cheap and safe to compute"),
    "boolean operator": (
        "the test sits in an `and`/`or` whose value is used, not tested by an `if`",
        "bind the value with an `if` statement, or compute it with torch.logical_and / "
        "torch.logical_or on tensors"),
}


def _form(site: BreakSite) -> str | None:
    """The Python form that holds a data-dependent test on the site's line, where it is one
    stitch does not rewrite (a comprehension filter, a conditional expression or and/or
    used as a value)."""
    if site.kind is not BreakKind.BRANCH:
        return None
    tree = parse_file(site.filename)
    if tree is None:
        return None
    on_line = [n for n in ast.walk(tree) if getattr(n, "lineno", None) == site.lineno]
    for node in ast.walk(tree):
        if isinstance(node, ast.comprehension) and node.ifs \
                and any(getattr(t, "lineno", None) == site.lineno for t in node.ifs):
            return "comprehension filter"
    if any(isinstance(n, ast.If | ast.While | ast.Assert) for n in on_line):
        return None
    if any(isinstance(n, ast.IfExp) for n in on_line):
        return "conditional expression"
    if any(isinstance(n, ast.BoolOp) for n in on_line):
        return "boolean operator"
    return None


def what_to_do(site: BreakSite) -> str:
    """What the user can change where stitch did not rewrite a break: torch.cond's rule
    where its cond failed, the form's own advice, or the kind's by-hand way (without the
    census's "stitch.export turns it into ...", which this refusal contradicts)."""
    if cond_failure(site):
        return COND_HINT
    if (form := _form(site)) is not None:
        return FORMS[form][1]
    advice = site.advice
    if not advice.stitch_does:
        return str(advice)
    by_hand = "rewrite it by hand" + (f": {advice.by_hand}" if advice.by_hand else "")
    return f"{advice.why}; {by_hand}" if advice.why else by_hand


def guards_message(guards: list[Decision]) -> str:
    lines = [f"{len(guards)} branch(es) could only be specialised to one side (guarded); "
             "a guarded program raises SpecializationError on every input taking the other "
             "side, so stitch refuses by default:"]
    for d in guards:
        lines.append(f"  {d.location} in {d.function or '?'}: {d.reason}")
    lines.append("What you can do: make the branch traceable by torch.cond (both sides "
                 "return tensors of one rank and dtype, no Python-only effects inside), move it out "
                 "of forward, or accept a specialised program with "
                 "stitch.export(..., settings=stitch.Settings(allow_guards=True)).")
    return "\n".join(lines)


def unfixable_message(remaining: list[BreakSite], decisions: list[Decision]) -> str:
    lines = [f"{len(remaining)} graph break(s) remain that stitch cannot rewrite:"]
    for s in remaining:
        decided = next((d for d in decisions if d.location == s.location
                        and d.action == Action.LEFT), None)
        why = decided.reason if decided is not None else ""
        advice = decided.advice if decided is not None and decided.advice else what_to_do(s)
        lines.append(f"  {s.location} [{s.kind.value}] in {s.function}"
                     f" (module {s.module_path or '<root>'}): {s.gb_type}"
                     + (f"\n      why not rewritten: {why}" if why else "")
                     + f"\n      what you can do: {advice}")
    lines.append("Pass allow_partial=True to get a program that runs the fewest graphs "
                 "stitch could reach.")
    return "\n".join(lines)
