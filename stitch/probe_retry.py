"""After a refusal (verification, export, or breaks left): export again with the model's
tracing probes answering as in eager (synthesize/tracing_probes.py), module by module
where the eager path breaks."""

from __future__ import annotations

from capture.errors import gist

from .errors import StitchError, UnfixableBreaksError
from .report import noted
from .synthesize.tracing_probes import answered_as_eager


def eager_probes(refusal: StitchError, run, bound, tries: int = 3):
    """Export again with the model's tracing probes answering as in eager
    (synthesize/tracing_probes.py). Where the eager path of some module cannot be traced
    (a break no rewrite removes there: transformers' ContextVar wrapper takes its traced
    path for that reason), that module's probes keep their traced answer and it is tried
    again. The first refusal stands where no try verifies, saying what the tries met."""
    tried: list[StitchError] = []
    for _ in range(tries):
        if not bound:
            break
        with answered_as_eager(bound):
            try:
                program = run()
            except UnfixableBreaksError as e:
                tried.append(e)
                files = {s.filename for s in e.sites}
                kept = [b for b in bound if getattr(b[0], "__file__", None) not in files]
                if len(kept) == len(bound):
                    break
                bound = kept
                continue
            except StitchError as e:
                tried.append(e)
                break
        return noted(program, "the model asks whether it is traced and computes otherwise "
                      "when it is; exported with these probes answering as in eager: "
                      + ", ".join(sorted({f"{m.__name__}.{n}" for m, n, _ in bound})))
    if tried:
        refusal.args = (f"{refusal}\nexported again with the model's tracing probes "
                        "(is_torchdynamo_compiling() and the like) answering as in eager: "
                        + "; then ".join(gist(e) for e in tried),)
    raise refusal
