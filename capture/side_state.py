"""Python state a forward mutates outside tensors: module globals and module attributes.

torch.export records tensor computation; a forward that bumps a counter, appends to a list
attribute or rebinds a global does that once, at trace time, and the exported program never
does it again. So stitch finds them (run the forward twice on the examples: globals must
not change at all, attributes must not change between the two runs, so a one-time lazy
initialisation is allowed) and refuses with the place in the source — except appends to a
list attribute, which stitch defers to the epilogue. Globals of the model's modules are
restored after analysis, whatever happened.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import torch

from .dict_items import changed_keys, item_changes
from .locate import locate as _locate
from .locate import locate_in_class
from .locate import locate_slot as _locate_slot
from .object_attributes import changed_attributes, note, where_set
from .object_state import instance_dict, namespace_roots, put_back, record, user_class
from .owners import holder_keys, owned_attributes, state_owners
from .reachable import Slot, SlotKind
from .readings import (
    attribute_values,
    attributes_state,
    equal,
    fingerprint,
    globals_state,
    lists,
    only_appended,
)
from .rebound import counted, read_before_set, rebindable
from .source import is_user_file
from .untaken_state import item_keys


@dataclass(frozen=True)
class Mutation:
    kind: str  # "global", "attribute", "state" (a slot), "append" (a list that only grows),
    # "tensor" (a plain tensor attribute of a module, reassigned or written in place on
    # every call, one dtype, shape and device throughout: a recurrent state) or "rebind"
    # (an attribute or slot set on every call to a new value of tensors and numbers the
    # forward computes, never read before it is set: capture/rebound.py) or "counter" (a
    # number every call only adds numbers to: ``self.calls += 1``; capture/rebound.Counting)
    owner: str  # module name, or module path in the model (<root> for the model itself)
    name: str
    location: str  # file:line of the first statement that can mutate it, or the file
    slot: Slot | None = None  # class attribute, module global or closure cell, if one
    start: object = None  # a counter's value before the forward first ran
    note: str = ""  # why it is not replayed, where that is known
    items: tuple = ()  # a dict's replayed items: (key, "set" | "add") pairs
    of_object: bool = False  # owner is a plain object the model holds (capture/owners.py)

    @property
    def target(self) -> str:
        """The attribute's path in the model (``encoder.history``; ``history`` on the root),
        or the slot's epilogue name (``class:pkg.mod.Model.history``)."""
        if self.slot is not None:
            return self.slot.target
        return self.name if self.owner == "<root>" else f"{self.owner}.{self.name}"

    def describe(self) -> str:
        what = (self.slot.describe() if self.slot is not None
                else f"module global {self.owner}.{self.name}" if self.kind == "global"
                else f"attribute {self.name!r} of "
                f"{'object' if self.of_object else 'module'} {self.owner}")
        verb = ("appends to" if self.kind == "append" else "sets a new tensor to"
                if self.kind == "tensor" else "sets a new value to" if self.kind == "rebind"
                else "counts in" if self.kind == "counter"
                else "keeps a cache (recomputed when it misses) in" if self.kind == "memo"
                else "sets items of" if self.kind == "items" else "mutates")
        return f"{self.location}: forward {verb} {what}" + (f" ({self.note})" if self.note
                                                             else "")


def user_modules(model: torch.nn.Module) -> list[types.ModuleType]:
    """The Python modules defining the model's classes, where they are user code."""
    seen: dict[str, types.ModuleType] = {}
    for m in model.modules():
        name = type(m).__module__
        module = sys.modules.get(name)
        if module is not None and is_user_file(getattr(module, "__file__", "") or ""):
            seen[name] = module
    return list(seen.values())


def find_mutations(model: torch.nn.Module, run: Callable[..., None],
                   slots: list[Slot] = ()) -> list[Mutation]:
    """Run twice (``run(after_each)`` runs every example, calling ``after_each()`` after
    each one when given); once where no call of the first run changed anything. A module global that differs from before the first run is mutated by the
    forward; an attribute, or a slot (class attribute, module global of any module the
    forward's code reaches, closure cell), that differs between after the first and after
    the second run is mutated on every call (a one-time lazy initialisation is not). A list
    that only grew is kind "append" (stitch can defer that to the epilogue); a plain tensor
    attribute that keeps its dtype, shape and device from before the first run on is kind
    "tensor" (stitch keeps it as a buffer of the program). An attribute rebound to an equal
    value on every pass (a cache moved to the input's device) is not state, unless its
    value differs from one example to the next within the second pass: then it follows each
    call's input (a state reset and recomputed per call), and is state like any other."""
    modules = user_modules(model)
    values0 = attribute_values(model)
    g0 = globals_state(modules)
    global_lists0 = {(m.__name__, k): (v, list.copy(v)) for m in modules
                     for k, v in vars(m).items() if type(v) is list}
    global_dicts0 = {(m.__name__, k): (v, dict.copy(v)) for m in modules
                     for k, v in vars(m).items() if type(v) is dict}
    held = _held(modules, model)  # fingerprints hold ids: keep their objects alive
    starts = {s.target: dict.copy(s.get()) if type(s.get()) is dict else s.get()
              for s in slots} | {
        f"global:{m.__name__}.{k}": dict.copy(v) if type(v) is dict else v
        for m in modules for k, v in vars(m).items() if _number(v) or type(v) is dict} | {
        (path or "<root>", k): dict.copy(v) for path, _m, k, v, _listed
        in owned_attributes(model) if type(v) is dict}
    everything = _everything(model, modules, slots)
    moved: list[bool] = []  # whether anything differed after a call of the first pass

    def after_first_calls() -> None:
        if not moved and not _same(_everything(model, modules, slots), everything):
            moved.append(True)

    run(after_first_calls)
    if not moved and _same(_everything(model, modules, slots), everything):
        # no call changed anything these readings see: every difference below is between
        # them, so a second pass, from the same state on the same examples, finds nothing
        return []
    a1, lists1 = attributes_state(model), lists(model)
    dicts1 = {(path or "<root>", k): (v, dict.copy(v)) for path, _m, k, v, _listed
              in owned_attributes(model) if type(v) is dict}
    held += _held(modules, model)
    values1 = attribute_values(model)
    user_globals = {(m.__name__, k) for m in modules for k in vars(m)}
    watched = [s for s in slots if (s.owner, s.name) not in user_globals]
    s1 = {s: (s.get(), fingerprint(s.get(), objects=True), list.copy(s.get()) if type(s.get()) is list
              else dict.copy(s.get()) if type(s.get()) is dict else None) for s in watched}
    per_example: list[dict] = []
    slots_seen: list[dict] = []  # each slot after each call (a value following the input)
    held_now: list = []
    run(lambda: (per_example.append(attribute_values(model)), held_now.extend(
        s.get() for s in watched), slots_seen.append({s: fingerprint(s.get(), objects=True)
                                                      for s in watched})))
    g2, a2 = globals_state(modules), attributes_state(model)
    follows_input = {k for k in (per_example[0] if per_example else {})
                     if any(per_example[0][k] is not later.get(k)
                            and not equal(per_example[0][k], later.get(k), dicts=True)
                            for later in per_example[1:])}
    found = []
    places: dict[str, tuple] = {}  # rebound to a new computed value: (get, set)
    counters: dict[str, tuple] = {}  # a number changed on every call: (get, set)
    dicts: dict[str, tuple] = {}  # the same dict, items changed: (get, set, keys changed)
    for (module_name, name) in sorted(k for k in g0.keys() | g2.keys() if g0.get(k) != g2.get(k)):
        module = sys.modules[module_name]
        where = _locate(getattr(module, "__file__", None), name, False)
        if only_appended(global_lists0.get((module_name, name)), vars(module).get(name)):
            slot = Slot(SlotKind.GLOBAL, module_name, name, vars(module),
                        where.rsplit(":", 1)[0])
            found.append(Mutation("append", module_name, name, where, slot))
        elif _number(g0.get((module_name, name), (0, None))[1]) and _number(
                vars(module).get(name)):  # maybe a counter (`global CALLS; CALLS += 1`)
            slot = Slot(SlotKind.GLOBAL, module_name, name, vars(module),
                        where.rsplit(":", 1)[0])
            found.append(Mutation("global", module_name, name, where, slot))
            counters[slot.target] = (slot.get, slot.set)
        elif global_dicts0.get((module_name, name), (None,))[0] is vars(module).get(name):
            slot = Slot(SlotKind.GLOBAL, module_name, name, vars(module),
                        where.rsplit(":", 1)[0])
            found.append(Mutation("global", module_name, name, where, slot))
            dicts[slot.target] = (slot.get, slot.set, changed_keys(
                global_dicts0[(module_name, name)][1], slot.get()))
        elif rebindable(vars(module).get(name)):  # set to a value of tensors it computes
            slot = Slot(SlotKind.GLOBAL, module_name, name, vars(module),
                        where.rsplit(":", 1)[0])
            found.append(Mutation("global", module_name, name, where, slot))
            places[slot.target] = (slot.get, slot.set)
        elif changed := changed_attributes(g0.get((module_name, name)),
                                           g2.get((module_name, name))):
            file = getattr(module, "__file__", None)
            found.append(Mutation("global", module_name, name, where_set(
                lambda a, file=file, name=name: _locate(file, f"{name}.{a}", False),
                changed, where),
                note=note(vars(module).get(name), changed)))
        else:
            found.append(Mutation("global", module_name, name, where))
    for slot, (value, printed, items) in s1.items():
        now = slot.get()
        if fingerprint(now, objects=True) == printed and all(seen[slot] == printed
                                                             for seen in slots_seen):
            continue
        appended = type(items) is list and only_appended((value, items), now)
        changed = changed_attributes(printed, fingerprint(now, objects=True))
        where = _locate_slot(slot)
        found.append(Mutation("append" if appended else "state", slot.owner, slot.name,
                              where_set(lambda a, slot=slot: _locate_slot(slot, a),
                                        changed, where)
                              if changed else where, slot,
                              note=note(now, changed) if changed else ""))
        if not appended and now is not value and rebindable(now):
            places[found[-1].target] = (slot.get, slot.set)
        elif _number(value) and _number(now):
            counters[found[-1].target] = (slot.get, slot.set)
        elif type(now) is dict and now is value:
            dicts[found[-1].target] = (slot.get, slot.set, changed_keys(items, now))
    owners = dict(state_owners(model))
    values2 = attribute_values(model)
    optional: dict[str, Mutation] = {}  # rebound to an equal value: replayed if set first
    # changed between the passes, or from one example to the next (a list or dict changed
    # in place to follow the input holds the same items after both passes)
    changed = {k for k in a1.keys() | a2.keys() if a1.get(k) != a2.get(k)}
    for (path, name) in sorted(k for k in changed | follows_input
                               if not changed.intersection(holder_keys(k[0]))):
        # an attribute of a plain object its holder rebound is that holder's change
        owner = owners.get("" if path == "<root>" else path)
        rebound = (owner is not None and a1.get((path, name), (0, 0))[1]
                   != a2.get((path, name), (0, 0))[1] and rebindable(vars(owner).get(name)))
        file = inspect.getsourcefile(type(owner)) if owner is not None else None
        if ((path, name) in values1 and (path, name) not in follows_input
                and equal(values1[(path, name)], values2.get((path, name)))):
            # rebound to an equal value every call: a moved cache (nothing to replay), or a
            # value computed from inputs the examples did not vary. Set before any read, it
            # is replayed, exact either way; read first, it is the cache
            if rebound:
                mutation = Mutation("rebind", path, name, _where(owner, file, name))
                optional[mutation.target] = mutation
                places[mutation.target] = _attribute_place(owner, name)
            continue
        appended = owner is not None and only_appended(lists1.get((path, name)),
                                                        vars(owner).get(name))
        # a buffer holds a module's recurrent tensor; a plain object's is other state
        kind = ("append" if appended else "tensor" if isinstance(
            owner, torch.nn.Module) and _same_tensor_kind(
            values0.get((path, name)), values1.get((path, name)), values2.get((path, name)))
            else "attribute")
        found.append(Mutation(kind, path, name, _where(owner, file, name),
                              of_object=owner is not None
                              and not isinstance(owner, torch.nn.Module)))
        if kind == "attribute" and rebound:
            places[found[-1].target] = _attribute_place(owner, name)
        elif kind == "attribute" and owner is not None and _number(
                values1.get((path, name))) and _number(values2.get((path, name))):
            counters[found[-1].target] = _attribute_place(owner, name)
        elif kind == "attribute" and owner is not None and dicts1.get(
                (path, name), (None,))[0] is vars(owner).get(name):
            dicts[found[-1].target] = (*_attribute_place(owner, name), changed_keys(
                dicts1[(path, name)][1], vars(owner)[name]))
    if places:  # replayable after the graph when no call reads them before setting them
        read, _unset = read_before_set(run, places)
        # one that some calls leave as it was (a branch sets it) is replayed where the
        # program's branch ran (stitch's branch_state); a path of the traced program that
        # keeps it at the top level fails the export instead (exporting._kept_old)
        found = [replace(m, kind="rebind") if m.target in places and m.target not in read
                 else m for m in found]
        # an equal value: replayed likewise where it is set (also by only some calls);
        # one read first is a moved cache (not state)
        found += [replace(m, kind="rebind") for t, m in optional.items() if t not in read]
    if counters:  # only ever added to: the epilogue adds the same numbers after the graph
        counting = counted(run, counters)
        found = [replace(m, kind="counter", start=starts.get(
            m.target, values0.get((m.owner, m.name)))) if m.target in counting
            else replace(m, note="a number it also reads or sets, beyond adding to it; "
                         "stitch replays a counter only added to (`+= n`), as the exported "
                         "program would hold the value it had when traced")
            if m.target in counters else m for m in found]
    if dicts:  # items set, or added to, the same way on every call that changes them
        replayable, why = item_changes(run, dicts)
        replayable = _with_untaken_keys(model, run, dicts, replayable)
        found = [replace(m, kind="items", items=tuple(replayable[m.target].items()),
                         start=starts.get(m.target, starts.get((m.owner, m.name))))
                 if m.target in replayable else replace(m, note=why[m.target])
                 if m.target in why else m for m in found]
    return found


def _everything(model: torch.nn.Module, modules, slots: list[Slot]) -> tuple:
    """Every reading ``find_mutations`` compares: the model's attributes (fingerprints, and
    values: a record in a dict changed in place), the user modules' globals, the slots."""
    return (attributes_state(model), globals_state(modules),
            [fingerprint(s.get(), objects=True) for s in slots], attribute_values(model))


def _same(a: tuple, b: tuple) -> bool:
    values_a, values_b = a[-1], b[-1]
    return a[:-1] == b[:-1] and values_a.keys() == values_b.keys() and all(
        equal(values_a[k], values_b[k], dicts=True) for k in values_a)


def _with_untaken_keys(model, run, dicts: dict, replayable: dict) -> dict:
    """``replayable`` with, for each of its dicts, the constant keys the source sets that
    no example changed, as ``"untaken"`` (a branch no example took sets them: replayed as
    the branch changes them) — when probing them too, as changed items no example may read,
    keeps the dict replayable; as it was otherwise."""
    source = item_keys(model)
    more = {t: (get, put, set(keys) | set(source.get(t.rpartition(".")[2], ())))
            for t, (get, put, keys) in dicts.items() if t in replayable}
    more = {t: v for t, v in more.items() if set(v[2]) - set(replayable[t])}
    if not more:
        return replayable
    wider, _why = item_changes(run, more)
    return {t: ({**keys, **{k: "untaken" for k in more[t][2] if k not in keys}}
                if t in wider else keys) for t, keys in replayable.items()}


def _number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _attribute_place(owner: torch.nn.Module, name: str) -> tuple:
    """(get, set) of a module's plain attribute, for the read-before-set probe."""
    return (lambda: vars(owner).get(name),
            lambda v: object.__setattr__(owner, name, v))


def _same_tensor_kind(*values) -> bool:
    """All tensors, of one dtype, shape and device (a state a buffer can hold)."""
    first = values[0]
    return all(isinstance(v, torch.Tensor) and v.dtype == first.dtype
               and v.shape == first.shape and v.device == first.device for v in values)


def _held(modules, model: torch.nn.Module) -> list:
    """Every object a fingerprint of the globals or attributes names by id, to depth 2: held
    between snapshots, no new object can take the id of one that was let go (a state
    rebound on every call would otherwise look unchanged when its new tensor reuses it)."""
    out: list = []

    def hold(value, depth: int) -> None:
        out.append(value)
        if depth < 2 and type(value) in (list, tuple):
            for v in value[:256]:
                hold(v, depth + 1)
        elif depth < 2 and isinstance(value, dict):
            for v in list(dict.values(value))[:256]:
                hold(v, depth + 1)
        elif depth < 2 and user_class(type(value)) and instance_dict(value) is not None:
            for v in list(dict.values(instance_dict(value)))[:256]:  # a user object's
                hold(v, depth + 1)

    for m in modules:
        for v in list(vars(m).values()):
            hold(v, 0)
    for m in model.modules():
        for v in list(vars(m).values()):
            hold(v, 0)
    return out


@contextlib.contextmanager
def preserved_globals(modules) -> Iterator[None]:
    """Restore the modules' globals on exit: rebinding undone, names added removed, and the
    contents of every mutable object they hold put back in place, to a bounded depth
    (containers and their subclasses, user objects' attributes, user functions' default
    arguments: ``capture/object_state.py``)."""
    saved = [(m, dict(vars(m))) for m in modules]
    contents = record(v for m in modules for v in namespace_roots(vars(m)))
    try:
        yield
    finally:
        for m, names in saved:
            current = vars(m)
            for k in [k for k in current if k not in names]:
                del current[k]
            for k, v in names.items():
                if current.get(k) is not v:
                    current[k] = v
        put_back(contents)


def _where(owner, file: str | None, name: str) -> str:
    """Where the owner's class likely changes ``name`` (its own lines first)."""
    return locate_in_class(owner, name) if owner is not None else _locate(file, name, True)
