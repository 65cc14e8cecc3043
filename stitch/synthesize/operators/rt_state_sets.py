"""State a data-dependent branch sets (``branch_state``), at run time: made as written when
the branch runs as Python; recorded while exporting as a ``rebind`` entry guarded by the
branch's flag, named by where the forward keeps it."""

from __future__ import annotations

from typing import Any

import torch
import torch.utils._pytree as pytree

from capture.rebound import addends

from ...epilogue.entries import Arg, Entry
from ...epilogue.targets import COUNTERS, KNOWN_MODEL, UNTAKEN, current, place_of_attribute
from ...errors import UnsupportedSideEffectError


def record_state_set(recorder, value: Any, options: dict, where: str,
                     guard: int | None) -> None:
    """The value's tensors become graph outputs; the epilogue sets the attribute to a new
    container of them when the output ``guard`` is true. What the attribute held when the
    branch ran is kept (``held_before``) so a set at the forward's top level can be ordered
    with it (``exporting``)."""
    leaves, structure = pytree.tree_flatten(value)
    target = _state_target(options, where)
    recorder.held_before[len(recorder.entries)] = current(
        KNOWN_MODEL[0] if KNOWN_MODEL else None, target)
    recorder.entries.append(Entry("rebind", where, tuple(
        Arg("tensor", output=recorder.take(a, False)) if isinstance(a, torch.Tensor)
        else recorder.arg(a, False) for a in leaves), {
            "target": target, "spec": pytree.treespec_dumps(structure)}, guard))


def record_state_add(recorder, value: Any, options: dict, where: str,
                     guard: int | None) -> None:
    """A branch adds ``value`` to a counter: the epilogue adds it when output ``guard`` is
    true (a number, or a size/scalar the graph returns)."""
    if isinstance(options["owner"], dict):  # an item of a dict (``D[k] += v``)
        return _record_item(recorder, value, options, where, guard, "add")
    target = _state_target(options, where)
    if target not in COUNTERS:
        raise UnsupportedSideEffectError(
            f"{where}: a branch adds to {target!r}, which the examples did not show to be a "
            "counter (a number every call only adds to, never read otherwise). What you can "
            "do: add an example that takes this branch, keep the count in a buffer, or "
            "return it.")
    if isinstance(value, bool) or not isinstance(value, int | float | torch.SymInt
                                                 | torch.SymFloat):
        raise UnsupportedSideEffectError(
            f"{where}: a branch adds a {type(value).__name__} to counter {target!r}; stitch "
            "replays additions of numbers. Add a Python number (`.item()` of a tensor is "
            "one), or keep the count in a buffer.")
    if _counted_before(options):  # the epilogue adds the top level's part after this one
        recorder.branch_adds_after_top.add(target)
    recorder.entries.append(Entry("add", where, (recorder.arg(value),),
                                  {"target": target, "start": COUNTERS[target]}, guard))


def _counted_before(options: dict) -> bool:
    """Whether the forward's top level added to the counter before this branch adds to it
    (its stand-in already holds additions)."""
    owner, attr = options["owner"], options["attr"]
    held = vars(owner).get(attr) if hasattr(owner, "__dict__") else None
    return bool(addends(held))


def record_item_set(recorder, value: Any, options: dict, where: str,
                    guard: int | None) -> None:
    """A branch sets an item of a dict: the epilogue sets it when ``guard`` is true."""
    _record_item(recorder, value, options, where, guard, "set")


def _record_item(recorder, value: Any, options: dict, where: str, guard: int | None,
                 how: str) -> None:
    items, key = options["owner"], options["attr"]
    target = getattr(items, "target", None)  # a RecordingDict while exporting
    if target is None or (items._keys.get(key) not in (how, "untaken")
                          and target not in UNTAKEN):
        raise UnsupportedSideEffectError(
            f"{where}: a branch {'adds to' if how == 'add' else 'sets'} item {key!r} of a "
            "dict the examples did not show changing that way (a branch no example took, "
            "or an item set on some calls and added to on others). What you can do: add "
            "an example that takes this branch, or keep the value in a buffer.")
    if how == "add":
        if isinstance(value, bool) or not isinstance(value, int | float | torch.SymInt
                                                     | torch.SymFloat):
            raise UnsupportedSideEffectError(
                f"{where}: a branch adds a {type(value).__name__} to item {key!r} of "
                f"{target!r}; stitch replays additions of numbers.")
        start = items._start.get(key, options.get("start"))  # missing: `get`'s default
        recorder.entries.append(Entry("add", where, (recorder.arg(value),), {
            "target": target, "key": key, "start": start}, guard))
        return
    leaves, structure = pytree.tree_flatten(value)
    recorder.entries.append(Entry("set_item", where, tuple(
        _leaf_arg(recorder, a) for a in leaves), {
            "target": target, "key": key, "spec": pytree.treespec_dumps(structure)}, guard))


def _leaf_arg(recorder, value):
    """A leaf of a value a branch sets: a tensor as it is at the end of the call."""
    if isinstance(value, torch.Tensor):
        return Arg("tensor", output=recorder.take(value, False))
    return recorder.arg(value, False)


def add_state(owner: Any, attr: Any, value: Any, *start: Any) -> None:
    """A counter a branch adds to (``branch_state``), run as Python: as written (an
    attribute, or an item when ``owner`` is a dict; ``start``: the default of the
    ``d.get(k, default)`` it read)."""
    if isinstance(owner, dict):
        owner[attr] = (owner.get(attr, start[0]) if start else owner[attr]) + value
    else:
        setattr(owner, attr, getattr(owner, attr) + value)


def set_item_state(owner: dict, key: Any, value: Any) -> None:
    """An item a branch sets (``branch_state``), run as Python: as written."""
    owner[key] = value


def set_state(owner: Any, attr: str, value: Any) -> None:
    """A state set ``branch_state`` rewrote, run as Python (not deferred): as written."""
    setattr(owner, attr, value)


def _state_target(options: dict, where: str) -> str:
    """How the epilogue names the attribute a branch sets (a model attribute's path, or the
    class/global slot), or a refusal when stitch does not know it as state the forward sets
    and never reads first."""
    owner, attr = options["owner"], options["attr"]
    target = place_of_attribute(owner, attr)
    if target is None:
        raise UnsupportedSideEffectError(
            f"{where}: a branch sets `{getattr(owner, '__name__', type(owner).__name__)}"
            f".{attr}`, which no example showed the forward setting without reading it first "
            "(a branch no example took, an object outside the model and its classes, or state "
            "some call reads first); stitch replays state a branch sets only where the "
            "examples measured it. What you can do: add an example that takes this branch, "
            "keep the value in a buffer, return it, or move the set out of the branch.")
    return target
