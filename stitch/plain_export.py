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

The same strategy also runs first, before any census, for a forward that printed, logged
and warned nothing on the examples, changed no Python state, and whose graph reads no tensor
as a Python number or size, except to assert on it (``as_written_first``, read_asserts.py):
torch.export takes most models as written, and then the Dynamo census would only count
graphs. A size test torch.export decides still becomes a cond (``size_rewrite``), and the
program is verified like any other (the new size a cond's arms of other lengths give is no
read; a read inside an arm is). Where torch.export or verification refuses it, the
export goes on with the census and the rewrites, as if this attempt had not been made (what
it stopped on is in the debug log).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

import torch

from capture import BreakKind
from capture.census import Census
from capture.isolation import model_copy

from .const_buffers import fold_constant_buffers, folded_note
from .errors import StitchError
from .exporting import Exported, export_model
from .number_inputs import TAKEN, number_reads
from .plan import Action, Decision
from .python_state import PythonState, as_attributes, keep_as_buffers
from .read_asserts import as_model_checks, asserted_only, python_asserts
from .rewrite_export import rewrite_and_export
from .size_rewrite import finished, noted_first
from .synthesize.convert.rounds import first_lines


def as_written(model, census, inputs, dynamic_shapes, strict: bool, changes: PythonState,
               refusal: StitchError, finish: Callable[[Exported], object]
               ) -> tuple[object | None, str, StitchError | None]:
    """The verified program torch.export makes of ``model`` as written; or None, why and
    the refusal met: torch.export refuses it, or its program differs from the model."""
    work = model_copy(model)
    as_attributes(work, changes.held_as_attributes)  # as stitch's own copy (python_state)
    keep_as_buffers(work, changes.tensors)
    folded = fold_constant_buffers(work)  # padding from int buffers (EnCodec): constants
    try:
        ep, epilogue = export_model(work, {}, inputs[0], dynamic_shapes, strict,
                                    changes.appends, changes.rebinds, changes.counters,
                                    changes.items)
    except StitchError as e:
        return (None, f"torch.export of the model as written fails too: "
                f"{first_lines(str(e), 1)}", e)
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
        return finish(exported), "", None
    except StitchError as e:
        return None, ("torch.export of the model as written exports, but its program was "
                      f"not verified: {first_lines(str(e), 1)}"), e


ASSERTED = ("values read from data only to be asserted on (an `assert` with no message) are "
            "checked in the graph as torch.export traced them; a failing check raises the "
            "model's AssertionError")
FIRST = ("torch.export took the model as written: the forward printed, logged and warned "
         "nothing on the examples, changed no Python state and reads no tensor as a number "
         "other than to assert on it, "
         "so no torch.compile census was needed (graphs before: not counted; stitch.explain "
         "counts them)")


def as_written_first(work, inputs, dynamic_shapes, strict: bool, settings, seconds: dict,
                     finish: Callable[[Exported], object]
                     ) -> tuple[object | None, str, StitchError | None]:
    """The verified program torch.export makes of ``work`` as written, before any census;
    or None, why it was left (torch.export or verification refused it, or its graph reads
    data) and the refusal met, if one was."""
    try:
        with python_asserts() as asserts:
            exported = rewrite_and_export(
                work, empty_census(), inputs, dynamic_shapes, strict,
                replace(settings, max_traced_breaks=0), [], seconds)
        reads = _data_reads(exported.ep)
        checks = asserted_only(exported.ep.graph, reads, asserts) if reads else []
        if checks is None or _reads_in_arms(exported.ep.graph_module):
            # Python's number rules on the values read: rewrites
            return None, ("its graph reads tensors as Python numbers or sizes, which the "
                          "rewrites keep Python's rules on"), None
        if checks:  # values read only to be asserted on: the model's AssertionError
            lines = as_model_checks(exported.ep.graph_module, checks, asserts)
            exported = replace(exported, notes=(f"{ASSERTED} ({', '.join(lines)})",
                                                *exported.notes))
        return finished(noted_first(exported, FIRST), finish), "", None
    except StitchError as e:  # the census and the rewrites take it from here
        logging.getLogger("stitch.debug").debug(
            "torch.export as written, before the census, was not kept: %s", str(e))
        return None, f"{type(e).__name__}: {first_lines(str(e), 1)[:300]}", e


def _data_reads(ep) -> list:
    """The graph's values read from data (``.item()``, ``.tolist()``, ``nonzero``: an
    unbacked symbol). Such a read is a break for torch.compile, and the rewrites keep
    Python's rules on it (an int product past int64 raises, as Python's ints do not wrap),
    which a graph traced as written does not, unless the value is only asserted on
    (read_asserts.py). A Python number the program takes as a 0-d tensor
    (number_inputs.py) is read back so, and is no data."""
    numbers = number_reads(ep, TAKEN.get())
    return [n for n in ep.graph.nodes
            if _reads_data(n) and not _reads_number(n, numbers)]


def _reads_data(node: torch.fx.Node) -> bool:
    """A node that binds a size read from data. A control-flow operator's unbacked
    bindings are its outputs' sizes (a cond on a size whose arms give other sizes): the
    reads, if any, are nodes of its subgraphs (``_reads_in_arms``)."""
    return "unbacked_bindings" in node.meta and not (
        node.op == "call_function" and node.target in _CONTROL_FLOW)


# torch's control-flow operators, whose outputs' sizes may be new symbols of their own
_CONTROL_FLOW = tuple(getattr(torch.ops.higher_order, name) for name in (
    "cond", "while_loop", "while_loop_stack_output", "map_impl", "scan")
    if hasattr(torch.ops.higher_order, name))


def _reads_in_arms(gm: torch.fx.GraphModule) -> bool:
    """Whether a subgraph of a control-flow operator (a cond's arm, a loop's body), at any
    depth, reads data."""
    subgraphs = [m for _, m in gm.named_modules() if m is not gm]
    return any(_reads_data(n) for m in subgraphs if isinstance(m, torch.fx.GraphModule)
               for n in m.graph.nodes)


def _reads_number(node, numbers: dict) -> bool:
    return (node.target is torch.ops.aten.item.default and len(node.args) == 1
            and isinstance(node.args[0], torch.fx.Node) and node.args[0].name in numbers)


def empty_census():
    """The census of a model torch.compile could not run (no sites, no graphs counted)."""
    import networkx as nx

    return Census(graph_count=0, break_count=0, sites=(), fragments=(), conditions=(),
                  examples=(), flow=nx.DiGraph())

