"""Never worse than torch.export: when stitch's rewrites are refused, the model as written.

torch.export (non-strict) takes some code torch.compile breaks on — a scalar read that only
feeds a slice bound becomes an unbacked SymInt, numpy planning over concrete shapes is
folded into constants — and some rewrites fail where the original traces. So before
refusing, stitch exports the model itself, unrewritten, with the epilogue recording the
prints, logs, warnings and appends torch.export alone would drop, and returns it when it
verifies against the model on every example (outputs, text, buffers, Python state), exactly
as a rewritten program is verified::

    before: UnfixableBreaksError (a .item() in a slice bound: no rewrite for it)
    after:  one ExportedProgram, decision "torch.export as written", the refusal in the notes

Integer buffers the forward only reads are read as constants there (``const_buffers``).
"""

from __future__ import annotations

from collections.abc import Callable

from capture import BreakKind
from capture.census import Census
from capture.isolation import model_copy

from .const_buffers import fold_constant_buffers, folded_note
from .errors import StitchError
from .exporting import Exported, export_model
from .plan import Action, Decision
from .python_state import PythonState, keep_as_buffers
from .synthesize.rounds import first_lines


def as_written(model, census, inputs, dynamic_shapes, strict: bool, changes: PythonState,
               refusal: StitchError, finish: Callable[[Exported], object]):
    """The verified program torch.export makes of ``model`` as written, or None (and a note
    on ``refusal``) when torch.export refuses it or its program differs from the model."""
    work = model_copy(model)
    keep_as_buffers(work, changes.tensors)  # as stitch's own copy (python_state)
    folded = fold_constant_buffers(work)  # padding from int buffers (EnCodec): constants
    try:
        ep, epilogue = export_model(work, {}, inputs[0], dynamic_shapes, strict,
                                    changes.appends, changes.rebinds, changes.counters,
                                    changes.items)
    except StitchError as e:
        _note(refusal, f"torch.export of the model as written fails too: {first_lines(str(e), 1)}")
        return None
    why = f"{type(refusal).__name__}: {first_lines(str(refusal), 1)}"
    decisions = [Decision(Action.AS_WRITTEN, s.location, s.function,
                          "torch.export traces the code as written (stitch's rewrites were "
                          "refused; see notes)", s.id)
                 for s in census.sites if s.kind != BreakKind.SIDE_EFFECT]
    exported = Exported(work, {}, decisions, 0, ep, epilogue, notes=(
        f"stitch's rewrites were refused ({why}); torch.export of the model as written "
        "exports, and its program verified against the model instead",
        *([folded_note(folded)] if folded else [])))
    try:
        return finish(exported)
    except StitchError as e:
        _note(refusal, "torch.export of the model as written exports, but its program was "
                       f"not verified: {first_lines(str(e), 1)}")
        return None


def empty_census():
    """The census of a model torch.compile could not run (no sites, no graphs counted)."""
    import networkx as nx

    return Census(graph_count=0, break_count=0, sites=(), fragments=(), conditions=(),
                  examples=(), flow=nx.DiGraph())


def _note(refusal: StitchError, text: str) -> None:
    """Say on the refusal what the torch.export fallback found (``add_note``)."""
    refusal.add_note(text)
