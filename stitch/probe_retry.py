"""After a refusal (verification, export, or breaks left): export again with the model's
tracing probes answering as in eager (synthesize/operators/tracing_probes.py), module by module
where the eager path breaks: first the modules holding breaks no rewrite handles."""

from __future__ import annotations

from capture.errors import gist

from .errors import StitchError, UnfixableBreaksError
from .report import noted
from .synthesize.convert.rounds import rewritable
from .synthesize.operators.tracing_probes import answered_as_eager


def eager_probes(refusal: StitchError, run, bound, tries: int = 4):
    """Export again with the model's tracing probes answering as in eager
    (synthesize/operators/tracing_probes.py). Where the eager path of some module cannot be traced
    (a break no rewrite removes there: transformers' ContextVar wrapper takes its traced
    path for that reason), that module's probes keep their traced answer and it is tried
    again: first only the modules whose breaks no rewrite handles (a rewrite elsewhere may
    have failed for their sake: PaliGemma 5.23's mask branch), and where that try is
    refused, every module with a break left. The first refusal stands where no try
    verifies, saying what the tries met."""
    tried: list[StitchError] = []
    wider = None  # the probes kept by the wider step, where the last step was the narrow one
    for _ in range(tries):
        if not bound:
            break
        with answered_as_eager(bound):
            try:
                program = run()
            except UnfixableBreaksError as e:
                tried.append(e)
                kept, every = _kept(bound, e.sites)
                if len(kept) == len(bound):
                    break
                bound, wider = kept, (every if len(every) < len(kept) else None)
                continue
            except StitchError as e:
                tried.append(e)
                if wider is None:
                    break
                bound, wider = wider, None
                continue
        return noted(program, "the model asks whether it is traced and computes otherwise "
                      "when it is; exported with these probes answering as in eager: "
                      + ", ".join(sorted({f"{m.__name__}.{n}" for m, n, _ in bound})))
    if tried:
        refusal.args = (f"{refusal}\nexported again with the model's tracing probes "
                        "(is_torchdynamo_compiling() and the like) answering as in eager: "
                        + "; then ".join(gist(e) for e in tried),)
    raise refusal


def _kept(bound, sites) -> tuple[list, list]:
    """The probes kept answering as in eager after a try left ``sites``: (those outside the
    files of the sites no rewrite handles, or where no probe is in such a file, outside
    every file with a site; those outside every file with a site)."""
    every = [b for b in bound if getattr(b[0], "__file__", None) not in
             {s.filename for s in sites}]
    unhandled = {s.filename for s in sites if not rewritable(s)}
    kept = [b for b in bound if getattr(b[0], "__file__", None) not in unhandled]
    return (kept if len(kept) < len(bound) else every), every
