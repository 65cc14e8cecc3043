"""What a refusal says: for every break left, why it was not rewritten and what the user
can do (``UnfixableBreaksError``), and for guarded branches why each could only be
specialised (``GuardsRefusedError``)."""

from __future__ import annotations

from capture import BreakSite

from .plan import Action, Decision
from .synthesize.nonzero_loop import may_apply
from .synthesize.rounds import REWRITTEN, cond_failure, left

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
                for s in remaining if (s.kind in REWRITTEN or may_apply(s)) and not decided(s)]
    return out + [left(s, "no rewrite for this kind of break") for s in remaining
                  if not decided(s)]


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
        why = next((d.reason for d in decisions if d.location == s.location
                    and d.action == Action.LEFT), "")
        lines.append(f"  {s.location} [{s.kind.value}] in {s.function}"
                     f" (module {s.module_path or '<root>'}): {s.gb_type}"
                     + (f"\n      why not rewritten: {why}" if why else "")
                     + f"\n      what you can do: {COND_HINT if cond_failure(s) else s.hint}")
    lines.append("Pass allow_partial=True to get a program that runs the fewest graphs "
                 "stitch could reach.")
    return "\n".join(lines)
