"""What torch.export traces: the model, plus the values its side effects need as outputs
(``WithEpilogue``). State the forward sets is read at the end of the traced call and
recorded into the epilogue, which replays it after the graph; where a path of the traced
program reads or keeps the old value of such state, no replay can be made and the export
is refused naming it (``kept_old``, ``not_counted``, ``item_read``)."""

from __future__ import annotations

import torch

from capture.rebound import Unset, addends

from .epilogue.targets import UNTAKEN, current
from .errors import StitchError, UnsupportedSideEffectError
from .number_inputs import NumberInput, model_inputs


class WithEpilogue(torch.nn.Module):
    """What is exported: the model, plus the values its side effects need, as outputs; the
    Python numbers it takes as 0-d tensors read back as numbers (number_inputs.py)."""

    def __init__(self, model: torch.nn.Module, recorder_box: list,
                 rebinds: dict[str, str] | None = None,
                 counters: dict[str, tuple] | None = None,
                 numbers: tuple[NumberInput, ...] = ()) -> None:
        super().__init__()
        self.model = model
        self._box = recorder_box
        self._rebinds = dict(rebinds or {})  # target -> where the forward sets it
        self._counters = dict(counters or {})  # target -> (where it counts, start value)
        self._numbers = tuple(numbers)

    def forward(self, *args, **kwargs):
        args, kwargs = model_inputs(self._numbers, args, kwargs)
        held = [(m._buffers, name, buf) for m in self.model.modules()
                for name, buf in m._buffers.items() if buf is not None]
        out = self.model(*args, **kwargs)
        _write_back_rebound(held)
        recorder = self._box[0]
        for target, location in self._rebinds.items():  # as of the end of the call
            value = current(self.model, target)
            in_branch = _set_in_a_branch(recorder, target)
            if isinstance(value, Unset):  # this trace's path keeps the old value
                if in_branch or target in UNTAKEN:  # replayed where the branch ran
                    continue
                raise kept_old(target, location)
            if recorder is not None:
                recorder.rebind(target, value, location)
                _order_with_branches(recorder, in_branch, value)
        for target, (location, start) in self._counters.items():
            added = addends(current(self.model, target), target)
            if added == () and _added_in_a_branch(recorder, target):
                continue  # only branches add to it: their guarded entries replay it
            if added == ():  # this trace's path leaves it as it was: nothing to replay
                continue  # (inputs taking a path that adds: verification, every example)
            if not added:  # this trace's path sets it
                raise not_counted(target, location)
            if target in getattr(recorder, "branch_adds_after_top", ()) and not (
                    _exact_in_any_order(start, added) and _ints_in_branches(recorder, target)
                    or _one_constant(added, recorder, target)):
                # the epilogue adds the branches' part first: eager's order only where
                # every top-level addition comes after them
                raise _float_order(target, location)
            if recorder is not None:
                recorder.count(target, added, location, start)
        return out, recorder.final_outputs() if recorder is not None else ()


def _write_back_rebound(held: list) -> None:
    """A buffer the forward rebound to a new tensor (``self.state = h``) is copied into the
    tensor it replaced, which is put back: torch.export records that as a buffer mutation,
    where it silently drops the rebinding of a submodule's buffer (measured on torch 2.14).
    A new value of another shape, dtype or device is left as it is (verification judges)."""
    for store, name, old in held:
        new = store.get(name)
        if (new is old or not isinstance(new, torch.Tensor) or not _same_shape(new, old)
                or new.dtype != old.dtype or new.device != old.device):
            continue
        with torch.no_grad():
            old.copy_(new)
        store[name] = old


def _same_shape(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Shapes known equal while tracing; a size from data (FastSpeech2's positional table
    rebuilt for a length computed from durations) is not, and is not guarded on."""
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    return a.dim() == b.dim() and all(statically_known_true(x == y)
                                      for x, y in zip(a.shape, b.shape, strict=True))


def _set_in_a_branch(recorder, target: str) -> list[int]:
    """Indices of the guarded ``rebind`` entries (a branch of the traced program sets
    ``target``)."""
    if recorder is None:
        return []
    return [i for i, e in enumerate(recorder.entries)
            if e.kind == "rebind" and e.guard is not None and e.options.get("target") == target]


def _added_in_a_branch(recorder, target: str) -> bool:
    """Whether a branch of the traced program adds to counter ``target`` (a guarded
    ``add`` entry)."""
    return recorder is not None and any(
        e.kind == "add" and e.guard is not None and e.options.get("target") == target
        for e in recorder.entries)


def _exact_in_any_order(start, added) -> bool:
    """Integer additions give the same sum in any order; float ones need eager's order."""
    return all(isinstance(v, int | torch.SymInt) and not isinstance(v, bool)
               for v in (start, *added))


def _ints_in_branches(recorder, target: str) -> bool:
    """Whether every number a branch adds to ``target`` is an int (a constant, or an int
    read); a float or a tensor may round in another order."""
    for e in recorder.entries:
        if e.kind == "add" and e.guard is not None and e.options.get("target") == target:
            for arg in e.args:
                if not ((arg.kind == "const" and type(arg.value) is int)
                        or (arg.kind == "scalar" and arg.value == "int")):
                    return False
    return True


def _one_constant(added, recorder, target: str) -> bool:
    """Whether every addition, at the top level and in the branches, adds one and the same
    constant (``TOTAL -= 0.1`` everywhere): then any order gives eager's sum."""
    if not all(type(v) in (int, float) for v in added):
        return False
    values = set(added)
    for e in recorder.entries:
        if e.kind == "add" and e.guard is not None and e.options.get("target") == target:
            for arg in e.args:
                if arg.kind != "const" or type(arg.value) not in (int, float):
                    return False
                values.add(arg.value)
    return len(values) == 1


def _float_order(target: str, location: str) -> StitchError:
    return _unreplayable(
        location, target, f"the forward adds floats (or values of unknown kind) to "
        f"{target!r} both at its top level and in a data-dependent branch; the epilogue "
        "replays the branch's additions apart from the others, and a float sum depends on the order of its additions (1.8 "
        "where eager holds 1.8000000000000003)", "add in one place (sum the "
        "branch's amount into a local number, then add it once), keep it in a buffer")


def _order_with_branches(recorder, in_branch: list[int], value) -> None:
    """State set at the forward's top level and in a branch: only the last set counts (the
    forward never reads it), so the top-level set (just recorded, last) moves before the
    first branch set it preceded with no top-level set after it; a top-level set after
    every branch set stays last."""
    first = next((i for i in in_branch if recorder.held_before.get(i) is value), None)
    if first is not None:
        recorder.entries.insert(first, recorder.entries.pop())
        recorder.held_before = {(i + 1 if i >= first else i): v
                                for i, v in recorder.held_before.items()}


def kept_old(target: str, location: str) -> StitchError:
    return _unreplayable(
        location, target, f"the forward sets {target!r} (never reading it first), but a "
        "path of the traced program keeps or reads its old value with no replay stitch can "
        "make (it sets such state again where the forward sets it at its top level, or in a "
        "data-dependent branch as a list/tuple/dict display `self.x = [a, b]` or on a class "
        "or module `type(self).x = ...`)", "set it on every path, build the container "
        "where the branch sets it, keep it in a buffer (register_buffer)")


def not_counted(target: str, location: str) -> StitchError:
    if target in UNTAKEN:
        return _unreplayable(
            location, target, f"only a path no example took adds to {target!r} (a counter "
            "the epilogue would replay where that path runs), but a path of the traced "
            "program uses its value otherwise (reads it, sets it)", "only add to it "
            "(`+= n`), add an example that takes that path, keep it in a buffer "
            "(register_buffer, updated in place)")
    return _unreplayable(
        location, target, f"the forward adds to {target!r} on every call the examples "
        "made (a counter the epilogue replays), but a path of the traced program uses its "
        "value otherwise (reads it, sets it, or never adds to it)", "only add to it "
        "(`+= n`) on every path, keep it in a buffer (register_buffer, updated in place)")


def item_read(target: str, location: str) -> StitchError:
    return _unreplayable(
        location, target, f"the forward sets items of dict {target!r} (the epilogue "
        "replays them), but a path of the traced program reads an item it changes before "
        "setting it, or sets one the examples only added to", "set such items before "
        "reading them on every path, keep the values in buffers")


def _unreplayable(location: str, target: str, found: str, advice: str) -> StitchError:
    return UnsupportedSideEffectError(
        f"{location}: {found}; the exported program would hold the value it had when "
        f"traced. What you can do: {advice}, or declare it scratch "
        f"(stitch.Settings(unchecked_state=({target!r},))).")
