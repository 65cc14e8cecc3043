"""The export step: torch.export of the (rewritten) model, its side effects recorded into the
epilogue, and the graph copies verification needs."""

from __future__ import annotations

import contextlib
import copy
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from capture import torch_messages as tm
from capture.contiguity import contiguity_unguarded
from capture.dim_solver import dim_advice_optional
from capture.errors import error_chain
from capture.inputs import Example
from capture.isolation import preserved_dynamo, preserved_rng, quiet_torch_logs
from capture.memo_state import cold_copy
from capture.rebound import Counting, Unset, read_while_traced
from capture.size_tensors import sizes_through_tensors
from capture.tracing_fixes import tracing_fixes
from capture.user_frames import user_line

from .epilogue import recording
from .epilogue.rebuilt import with_rebuilt_warnings
from .epilogue.record import WrittenLater
from .epilogue.record_items import deferred_items
from .epilogue.record_lists import deferred_appends
from .epilogue.targets import MEMOS, arm_targets, current, rebind
from .errors import ExportFailedError, StitchError
from .export_wrapper import WithEpilogue, item_read, kept_old, not_counted
from .number_inputs import TAKEN, graph_inputs
from .synthesize.convert.functions import installed
from .synthesize.convert.rounds import first_lines
from .synthesize.operators.rt_pin_sizes import tracing_sizes
from .synthesize.operators.rt_pins import restart as restart_pins
from .synthesize.operators.site_marks import marking


@dataclass
class Exported:
    """What the export step hands to verification: the exported program, its epilogue, the
    rewrites installed while exporting, and the decisions that led there."""

    work: torch.nn.Module
    rewrites: dict
    decisions: list
    rounds: int
    ep: torch.export.ExportedProgram
    epilogue: Any
    notes: tuple[str, ...] = field(default=())
    # a size test rewritten (size_rewrite.py): the program to try should this one fail
    # verification (the other rewrite's, or the one before), and the sizes it added
    fallback: Any = None
    widening: Any = None


def _with_signature_of(model: torch.nn.Module) -> type:
    """A ``WithEpilogue`` whose ``forward`` has the model's signature, so torch.export binds
    ``dynamic_shapes`` (tuple or dict by argument name) exactly as for the model itself."""
    import inspect

    try:
        signature = inspect.signature(model.forward)
    except (TypeError, ValueError):
        return WithEpilogue

    def forward(self, *args, **kwargs):
        return WithEpilogue.forward(self, *args, **kwargs)

    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    forward.__signature__ = signature.replace(
        parameters=[self_param, *signature.parameters.values()])
    return type("WithEpilogueFor" + type(model).__name__, (WithEpilogue,), {"forward": forward})


def _unalias_buffers(work: torch.nn.Module) -> None:
    """A buffer that is the same tensor as a plain attribute (``register_buffer("inv_freq",
    self.original_inv_freq)``) would let an in-graph buffer update overwrite that attribute,
    which export lifts as a constant: give each such buffer its own storage. A buffer that
    is an ``nn.Parameter`` (FalconMamba 4.52's ``register_buffer("b_c_rms",
    nn.Parameter(...), persistent=False)``) becomes the plain tensor it holds: torch.export
    exports it, then fails to put it back on the module ("attribute already exists")."""
    seen: set[int] = set()
    for module in work.modules():
        for value in vars(module).values():
            if isinstance(value, torch.Tensor):
                seen.add(id(value))
    for module in work.modules():
        for name, buf in list(module._buffers.items()):
            if buf is None:
                continue
            if id(buf) in seen:
                module._buffers[name] = buf.clone()
            elif isinstance(buf, torch.nn.Parameter):
                module._buffers[name] = buf.detach()
            seen.add(id(module._buffers[name]))


def export_model(work, rewrites, ex: Example, dynamic_shapes, strict: bool, appends: list[str],
                 rebinds: dict[str, str] | None = None,
                 counters: dict[str, tuple] | None = None,
                 items: dict[str, tuple] | None = None):
    """torch.export of ``work`` with ``rewrites`` installed; the epilogue recorded. A tensor a
    deferred call took and the forward then wrote in place is exported again, copied at the
    call (the call sees the value of its moment). ``rebinds``: state the forward sets on
    every call (target -> file:line), set again by the epilogue; ``counters``: numbers it
    only adds to (target -> (file:line, start value)), added to again by the epilogue;
    ``items``: dicts whose items it sets or adds to (capture/dict_items.py)."""
    _unalias_buffers(work)
    copies: frozenset[int] = frozenset()
    for _attempt in range(4):
        try:
            return _export_once(work, rewrites, ex, dynamic_shapes, strict, appends, copies,
                                rebinds or {}, counters or {}, items or {})
        except ExportFailedError as e:
            later = _written_later(e)
            if later is None or later <= copies:
                raise
            copies |= later
    raise ExportFailedError("tensors taken by deferred calls kept being written in place "
                            f"after the call (outputs {sorted(copies)}), after 4 exports")


def _written_later(error: BaseException) -> frozenset[int] | None:
    return next((e.indices for e in error_chain(error) if isinstance(e, WrittenLater)), None)


def _export_once(work, rewrites, ex: Example, dynamic_shapes, strict: bool,
                 appends: list[str], copies: frozenset[int], rebinds: dict[str, str],
                 counters: dict[str, tuple], items: dict[str, tuple]):
    box: list = [None]
    numbers = TAKEN.get()  # Python numbers taken as 0-d tensor inputs
    wrapper = _with_signature_of(work)(work, box, rebinds, counters, numbers)
    args, kwargs = graph_inputs(numbers, ex.args, ex.kwargs)
    stood_in = [*appends, *arm_targets(appends)]  # also lists only untaken arms append to
    with preserved_rng(), preserved_dynamo(), quiet_torch_logs(), installed(rewrites), \
            recording(copies) as recorder, deferred_appends(work, stood_in), marking(), \
            tracing_fixes(), _kept(work, rebinds), _kept(work, counters, Counting), \
            deferred_items(work, items):
        box[0] = recorder
        restart_pins()  # pinned reads (allow_guards) answer from example 0's first call
        try:
            with warnings.catch_warnings():
                # state the epilogue sets again (rebinds): torch.export's advice to make it
                # a buffer does not apply
                warnings.filterwarnings("ignore", tm.ATTRIBUTE_ASSIGNED.pattern.pattern)
                # op sizes pinned (allow_guards), if any; sizes read back from tensors;
                # contiguous() with no guard on the layout; torch's advice on AUTO
                # dimensions not required to finish
                with tracing_sizes(), sizes_through_tensors(), contiguity_unguarded(), \
                        dim_advice_optional(dynamic_shapes):
                    ep = torch.export.export(wrapper, args, kwargs,
                                             dynamic_shapes=dynamic_shapes, strict=strict)
        except StitchError:
            raise
        except Exception as e:
            read = read_while_traced(e)
            if read is None and _UNSET_TYPE in str(e):  # handed on, not used (a cond
                read = ", ".join(rebinds)  # output): torch names the type only
            if read in counters:
                raise not_counted(read, counters[read][0]) from e
            if read in items:
                raise item_read(read, items[read][0]) from e
            if read and rebinds:
                raise kept_old(read, rebinds.get(read, "<the forward>")) from e
            where = user_line(e)
            raise ExportFailedError(
                (f"{where}: " if where else "") + f"torch.export refused the {'rewritten ' if rewrites else ''}model "
                f"{'while tracing this line' if where else ''}: {type(e).__name__}: "
                f"{first_lines(str(e))}{export_hint(str(e))}", where=where) from e
        finally:
            box[0] = None
    return ep, with_rebuilt_warnings(recorder.epilogue(), ep.call_spec.out_spec)


_UNSET_TYPE = f"{Unset.__module__}.{Unset.__qualname__}"  # as torch names its class

# torch.export's own refusals with a known cause: (its message, what to change; ``{0}``,
# ``{1}``: the message's first group, and that group's last dotted part)
EXPORT_ERROR_HINTS: tuple[tuple[tm.TorchMessage, str], ...] = (
    (tm.UNKNOWN_OUTPUT_TYPE,
     "the forward returns a {0}, whose fields torch.export cannot see (stitch registers a "
     "dataclass itself; this class is none): register it with torch's pytree before "
     "exporting (torch.utils._pytree.register_pytree_node({1}, ...)), make it a "
     "dataclass, or return a tuple or dict of tensors"),
    (tm.COND_OUTPUT_RANK,
     "the two sides of a branch stitch made a torch.cond give one value a different rank "
     "({0} dimensions: a reduction or reshape on one side only, or a loop whose number of "
     "steps is data): one graph gives each value one rank, so where the model's result "
     "has the rank the data decides there is no single graph for it. Keep the rank on both "
     "sides (keepdim=True, unsqueeze, reshape to one shape), or export one program per side "
     "(each from examples on that side)"),
    (tm.PENDING_UNBACKED,
     "a value read from data inside a branch stitch made a torch.cond (an index `x[i]` with "
     "a tensor `i`, an `.item()`) cannot leave the branch in torch 2.14 (the branch may be "
     "one stitch made to keep Python's order: an arm that may raise, or an operand of "
     "`and`/`or` after a test that rules it out). Index with a tensor op instead "
     "(`x.index_select(0, i.reshape(1))`, `torch.gather`), or read the value before the "
     "branch"),
    (tm.NUMPY_UNSUPPORTED,
     "the forward converts a tensor to NumPy (`.numpy()`), which no graph holds: write that "
     "step with torch ops (the same arithmetic exists on tensors)"),
)


def export_hint(text: str) -> str:
    """``\nWhat you can do: ...`` for a torch.export refusal of a known cause, else ""."""
    for message, hint in EXPORT_ERROR_HINTS:
        if (found := tm.search(message, text)) is not None:
            name = found.group(1) if found.groups() else ""
            return "\nWhat you can do: " + hint.format(name, name.rpartition(".")[2])
    return ""


@contextlib.contextmanager
def _kept(work: torch.nn.Module, targets, stand_in: type = Unset) -> Iterator[None]:
    """While tracing, the values at ``targets`` are unusable (``Unset``: a path that reads or
    keeps the old value fails the export instead of baking it into the graph; a counter's
    ``Counting`` takes additions only); put back afterwards (the trace set them to its own
    tensors, which must not outlive it)."""
    saved = [(t, current(work, t)) for t in targets]
    for target in targets:  # a memo: its cold value, which the trace recomputes from
        rebind(work, target, cold_copy(MEMOS[target]) if target in MEMOS
               else stand_in(target, set()))
    try:
        yield
    finally:
        for target, value in saved:
            rebind(work, target, value)


def graph_copy(module: torch.nn.Module) -> torch.nn.Module:
    """A copy with its own graphs (``ep.module()`` shares the cond subgraphs with the
    ExportedProgram) and the same parameter and buffer tensors."""
    memo = {id(t): t for t in (*module.parameters(), *module.buffers())}
    return copy.deepcopy(module, memo)
