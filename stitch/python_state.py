"""Python state a forward changes outside tensors: found, deferred where the replay is
exact, refused otherwise (with file:line and what to change).

    self.seen.append(h)        -> deferred: the graph returns h, the epilogue appends it
    Model.history.append(h)    -> deferred likewise (class attribute, module global, closure)
    self.state = h.detach()    -> kept: the attribute becomes a buffer of the program (same
                                  dtype, shape and device on every call), updated as eager
    self.pyramid = [c0, c1]    -> deferred: set on every call before it is read, the graph
                                  returns c0 and c1, the epilogue sets a new list of them
    self.stats["last"] = h     -> deferred: the epilogue sets the item to the graph's value
    COUNTS["calls"] += 1       -> deferred: an item only added to, as a counter
    self.calls += 1            -> deferred: every call only adds numbers to it, so the
                                  epilogue adds the same numbers after the graph (a size
                                  from the input leaves the graph as a scalar)
    if self.calls % 10 == 0    -> refused: the old value is read, and the exported program
                                  would hold the value it had when traced
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from capture import draws, memo, memo_state
from capture.inputs import Example
from capture.isolation import (
    model_copy,
    preserved_rng,
    reset_examples,
    restoring_state,
    silenced_output,
)
from capture.locate import locate_in_class
from capture.owners import state_owners
from capture.readings import fingerprint
from capture.rebound import Counting, Unset
from capture.side_state import Mutation, find_mutations
from capture.untaken_state import candidates, item_candidates, set_candidates, untouched

from .epilogue.entries import Arg, Entry
from .epilogue.targets import know_counters, know_items, know_memos, register_shared
from .errors import UnsupportedSideEffectError
from .synthesize.operators.shims import know_dead_draws

DEFERRED_STATE = ("append", "rebind", "counter", "items", "memo")  # the epilogue replays


@dataclass(frozen=True)
class PythonState:
    """What the forward changes that stitch carries: list targets whose appends the epilogue
    replays, and tensor attributes (module path and name) the program keeps as buffers."""

    appends: list[str]
    tensors: list[str]
    unchecked: tuple[str, ...] = ()  # Settings.unchecked_state the forward does change
    rebinds: dict[str, str] = field(default_factory=dict)  # target -> file:line it is set
    counters: dict[str, tuple] = field(default_factory=dict)  # target -> (file:line, start)
    # a dict's items: target -> (file:line, {key: "set" | "add"}, its items before any call)
    items: dict[str, tuple] = field(default_factory=dict)
    # draws from Python's or numpy's generator that change no output (capture/draws.py):
    # replayed after the graph, so the generators advance as in eager
    draws: tuple = ()
    # the analysis's runs printed, logged or warned (a ``warning_once`` says so on the
    # first call in the process only: these runs are the first)
    said: bool = False
    # the examples' inputs and outputs on the forward's first calls, as ``first_runs.warm_up``
    # gives them, where those calls left the model's attributes, parameters and buffers as
    # they found them (nothing made lazily): the model copied before them needs no warm-up
    first_calls: list | None = None
    # buffers the forward sets to a tensor of another shape, which stitch's copy holds as
    # plain attributes (caches, ``as_attributes``): paths
    held_as_attributes: tuple[str, ...] = ()
    model_failed: bool = False  # the model raised on an example: the census says it

    @property
    def state_targets(self) -> list[str]:
        """The state the epilogue sets or adds to, compared after every call."""
        return [*self.rebinds, *self.counters, *self.items]


def python_state_mutations(work, inputs: list[Example], strict: bool,
                           slots: list, unchecked: tuple[str, ...] = (),
                           reshaping: bool = True) -> PythonState:
    """A forward that mutates Python state (a counter attribute, a module global) on every
    call would do so once, at trace time, and never in the exported program: refuse, naming
    each one, instead of dropping it silently. Appends to a list — an attribute of the
    model, or a list kept on its class, in a module global or in a closure cell (``slots``)
    — are deferred to the epilogue instead: their targets are returned. A plain tensor
    attribute set (or written in place) on every call, keeping its dtype, shape and device,
    is a recurrent state: ``work`` keeps it as a non-persistent buffer from here on, which
    torch.export records as a buffer mutation (the program holds and updates its own). State
    set on every call to a new value the forward computes, never read before it is set (a
    list of tensors, a tensor whose shape follows the input), is set again by the epilogue
    (its targets are returned too).
    ``unchecked``: targets the user declared scratch (``Settings.unchecked_state``): dropped,
    neither refused nor kept."""
    know_counters({}), know_items(()), know_memos({})  # nothing measured yet
    know_dead_draws(())
    probe = model_copy(work)  # lists outside the model stay shared (isolation.sharing)

    class _ModelFailed(Exception):
        pass

    drew: set[str] = set()  # Python-level generators a forward draws from
    first_calls: list = []  # (args, kwargs), output: the examples' first calls, in order
    readings = [_lazy_reading(probe)]  # before the first calls, and after them

    def run(after_each=None) -> None:
        for ex in inputs:
            before = draws.states()
            reset_examples(ex)  # a forward writing its input in place: each run as given
            try:
                out = probe(*ex.args, **ex.kwargs)
            except Exception as e:
                raise _ModelFailed from e
            if len(readings) == 1:
                first_calls.extend(((ex.args, ex.kwargs), out))
            drew.update(k for k, v in draws.states().items() if before[k] != v)
            if after_each is not None:
                after_each()
        if len(readings) == 1:
            readings.append(_lazy_reading(probe))

    try:
        with restoring_state(probe), preserved_rng(), torch.no_grad(), \
                silenced_output() as observed:
            # an attribute None until the first call counts as created by it
            had = {(p, n) for p, n, v in memo.plain_attributes(probe) if v is not None}
            buffers = dict(probe.named_buffers())
            with memo.attribute_writes(probe) as written:
                found = find_mutations(probe, run, slots)
            reshaped = _reshaped_buffers(probe, buffers) if reshaping else []
            if reshaped:
                raise _Reshaped(reshaped)
            found += _untaken_state(probe, run, slots, {m.target for m in found})
            found, memos = _memos(work, probe, inputs, found)
            _refuse_memos(work, probe, inputs, had, {m.target for m in found} | set(unchecked),
                          written)
            dead, why = draws.dead_draws(probe, inputs) if drew else ([], "")
            if drew and not dead:
                with draws.recorded() as made:
                    run()
                _refuse_draws(sorted(drew), made, why or "no draw was seen")
            know_dead_draws(dead)  # stand-ins while stitch traces; replayed after the graph
    except _ModelFailed:
        return PythonState([], [], said=True, model_failed=True)  # the census says it
    except _Reshaped as reshaped:  # as plain attributes of stitch's copy, analysed again
        held = as_attributes(work, reshaped.paths)
        state = python_state_mutations(work, inputs, strict, slots, unchecked)
        if not state.model_failed:
            return replace(state, held_as_attributes=tuple(reshaped.paths))
        # the forward needs them as buffers (``register_buffer`` of the name again): kept
        # so, verification then compares them as torch.export leaves them
        as_buffers(work, held)
        return python_state_mutations(work, inputs, strict, slots, unchecked, False)
    dropped = tuple(m.target for m in found if m.target in unchecked)
    found = [m for m in found if m.target not in unchecked]
    register_shared(m.slot for m in found
                    if m.kind in DEFERRED_STATE and m.slot is not None)
    refused = [m for m in found if m.kind not in (*DEFERRED_STATE, "tensor")
               or (strict and m.kind in DEFERRED_STATE)]
    if refused:
        strict_note = ("\nstrict=True cannot defer appends to list attributes, counters or "
                       "state set on every call (Dynamo traces them); strict=False can."
                       if strict and any(m.kind in DEFERRED_STATE for m in refused) else "")
        raise UnsupportedSideEffectError(
            "the forward mutates Python state (on at least one example) that torch.export "
            "cannot record (the exported program would never change it):\n" +
            "\n".join(f"  {m.describe()}" for m in refused) +
            "\nWhat you can do: keep such state in a buffer (register_buffer, updated in "
            "place), return it as an output, or move the mutation out of forward; if it is "
            "scratch nothing reads after the call (a cache rebuilt before it is read), "
            "declare it: stitch.Settings(unchecked_state=("
            + ", ".join(repr(m.target) for m in refused) + ",))." + strict_note)
    know_counters({m.target: m.start for m in found if m.kind == "counter"},
                  {m.target for m in found if m.note == _UNTAKEN})
    know_items(m.target for m in found if m.kind == "items")  # after know_counters
    know_memos(memos)
    tensors = [m.target for m in found if m.kind == "tensor"]
    keep_as_buffers(work, tensors)
    return PythonState([m.target for m in found if m.kind == "append"], tensors, dropped,
                       {m.target: m.location for m in found if m.kind in ("rebind", "memo")},
                       {m.target: (m.location, m.start) for m in found if m.kind == "counter"},
                       {m.target: (m.location, dict(m.items), m.start) for m in found
                        if m.kind == "items"}, tuple(dead),
                       said=bool(observed.stdout or observed.warnings or observed.logs),
                       first_calls=first_calls if readings[0] == readings[-1] else None)


_UNTAKEN = "only paths no example took change it"


def _lazy_reading(model: torch.nn.Module) -> tuple:
    """What a first call could make lazily: each plain attribute (by identity, containers
    item by item), each parameter and buffer (by identity, shape and dtype)."""
    tensors = (*model.named_parameters(remove_duplicate=False),
               *model.named_buffers(remove_duplicate=False))
    return (tuple((p, n, fingerprint(v, objects=True)) for p, n, v in memo.plain_attributes(model)),
            tuple((n, id(t), tuple(t.shape), t.dtype) for n, t in tensors))


def draw_entries(state: PythonState) -> tuple:
    """Epilogue calls that make the forward's dead draws again (the generators advance as
    in eager), in order."""
    return tuple(Entry("call", d.location, tuple(Arg("const", value=a) for a in d.args),
                       {"module": d.module, "name": d.name}) for d in state.draws)


def _refuse_memos(work, probe, inputs, had: set, known: set[str],
                  written: set[tuple[str, str]]) -> None:
    """Attributes the forward creates on first use from its input, or sets from it where the
    examples' runs left them unchanged (``capture/memo.py``): a program would never set
    them. ``known``: state handled otherwise (replayed, kept as buffers, declared scratch).
    ``written``: the attributes the examples' runs set (the others cannot follow the
    input)."""
    every = {(p, n) for p, n, _ in memo.plain_attributes(probe)
             if (f"{p}.{n}" if p else n) not in known}
    made = every - had
    derived = memo.from_inputs(work, inputs, made & written, (every - made) & written)
    if not derived:
        return

    owners = dict(state_owners(work))
    lines = []
    for (path, name), index in sorted(derived.items()):
        where = locate_in_class(owners[path], name)
        how = "created" if (path, name) in made else "set"
        lines.append(f"  {where}: attribute {name!r} of module {path or '<root>'}, {how} "
                     f"from example {index}'s input")
    raise UnsupportedSideEffectError(
        "the forward creates or sets attributes from its input: a value memoized from the "
        "first input that takes that path, or one set on every call (the examples' runs "
        "set it to the same value, an input changed from example 0 to another, found "
        "by stitch on a copy). torch.export records no "
        "attribute writes: the exported program would never set them, and later code would "
        "read the examples' value or none:\n"
        + "\n".join(lines) + "\nWhat you can do: compute the value in __init__ (from the "
        "configuration), recompute it on every call without keeping it, keep it in a buffer "
        "(register_buffer, written in place), or return it as an output.")


def _refuse_draws(generators: list[str], made: list, why: str) -> None:
    names = " and ".join(draws.GENERATORS[g] for g in generators)
    where = "".join(f"\n  {site}" for site in dict.fromkeys(d.location for d in made))
    raise UnsupportedSideEffectError(
        f"the forward draws random numbers from {names}{where}\n{why}: torch.export "
        "evaluates such a draw once, while tracing, and the program would return those same "
        "numbers on every call.\nWhat you can do: draw with torch (torch.rand, torch.randn, "
        "torch.randint, torch.randperm: they stay in the graph and follow torch's "
        "generator), or pass the numbers in as inputs.")


def _memos(work, probe, inputs, found: list) -> tuple[list, dict]:
    """The model's attributes the forward reads and sets, or fills on first use, that are a
    cache on the examples (``capture/memo_state.py``): kind "memo", set again by the
    epilogue like state set on every call, traced from their cold values (returned: target
    -> value). ``probe``: the copy of ``work`` the analysis ran."""
    places = {m.target: ("" if m.owner == "<root>" else m.owner, m.name) for m in found
              if m.slot is None and m.kind in ("attribute", "rebind")}
    first_use = {(f"{p}.{n}" if p else n): (p, n) for p, n in memo_state.changed_from(
        work, probe, memo.plain_attributes(probe))}
    first_use = {t: place for t, place in first_use.items() if t not in places
                 and t not in {m.target for m in found}}
    if not first_use and not any(m.kind == "attribute" and m.target in places
                                 for m in found):
        return found, {}  # nothing read before it is set, nothing filled: no cache
    # plain tensor attributes set beside it belong to the cache too (RT-DETR's decoder
    # keeps ``shapes`` with ``anchors`` and ``valid_mask``): judged together first, since
    # the cache is only right with all of them cold; else without them (their own state)
    tensors = {m.target: ("" if m.owner == "<root>" else m.owner, m.name) for m in found
               if m.slot is None and m.kind == "tensor"}
    cold = {}
    for extra in ([tensors, {}] if tensors else [{}]):
        cold = memo_state.memo_values(work, inputs, [*places.values(), *extra.values(),
                                                     *first_use.values()])
        if cold:
            places.update(extra)
            break
    if not cold:
        return found, {}
    owners = dict(state_owners(work))
    memos = {t: cold[place] for t, place in (*places.items(), *first_use.items())}
    return [*(replace(m, kind="memo") if m.target in memos else m for m in found),
            *(Mutation("memo", p or "<root>", n, locate_in_class(owners[p], n))
              for p, n in first_use.values())], memos


def _untaken_state(probe, run, slots: list, known: set[str]) -> list:
    """Counters only paths no example took add to, and state only such paths set
    (``capture/untaken_state.py``)."""
    kinds = (("counter", candidates(probe, slots, known), Counting),
             ("rebind", set_candidates(probe, slots, known), Unset),
             ("items", item_candidates(probe, slots, known), Unset))
    places = {t: (*place, kind) for kind, found, _ in kinds for t, place in found.items()}
    stand_ins = {t: stand_in for _, found, stand_in in kinds for t in found}
    found = []
    for target in untouched(run, places, stand_ins):  # all kinds in one probe
        _get, _set, start, location, slot, kind = places[target]
        owner, _, name = target.rpartition(".")
        found.append(Mutation(kind, slot.owner if slot else owner or "<root>",
                              slot.name if slot else name, location(), slot,
                              dict.copy(start) if kind == "items" else start,
                              note=_UNTAKEN))
    return found


class _Reshaped(Exception):
    def __init__(self, paths: list[str]) -> None:
        super().__init__(paths)
        self.paths = paths


def _reshaped_buffers(module: torch.nn.Module, before: dict) -> list[str]:
    """The buffers (paths) the forward set to a tensor of another shape (a table rebuilt
    for the input's size: timm's ConViT ``rel_indices``). torch.export writes a buffer the
    forward sets back in place, which cannot change its shape; as a plain attribute the
    same table is a cache (``_memos``), recomputed in the graph and set after it."""
    return [name for name, t in module.named_buffers()
            if name in before and t is not before[name] and t.shape != before[name].shape]


def as_attributes(module: torch.nn.Module, paths) -> dict[str, bool]:
    """Each buffer at ``paths`` becomes a plain tensor attribute of ``module`` holding the
    same tensor (on stitch's copy of the model, never the model itself); path -> whether it
    was persistent (``as_buffers`` takes it back)."""
    persistent = {}
    for path in paths:
        owner_path, _, name = path.rpartition(".")
        owner = module.get_submodule(owner_path)
        value = owner._buffers.pop(name)
        persistent[path] = name not in owner._non_persistent_buffers_set
        owner._non_persistent_buffers_set.discard(name)
        setattr(owner, name, value)
    return persistent


def as_buffers(module: torch.nn.Module, persistent: dict[str, bool]) -> None:
    """``as_attributes`` undone."""
    for path, kept in persistent.items():
        owner_path, _, name = path.rpartition(".")
        owner = module.get_submodule(owner_path)
        owner.register_buffer(name, owner.__dict__.pop(name), persistent=kept)


def keep_as_buffers(module: torch.nn.Module, paths: list[str]) -> None:
    """Each plain tensor attribute at ``paths`` (``block.state``; ``state`` on the root)
    becomes a non-persistent buffer of ``module`` holding the same tensor (a copy of the
    user's model, never the model itself)."""
    for path in paths:
        owner_path, _, name = path.rpartition(".")
        owner = module.get_submodule(owner_path)
        value = vars(owner).pop(name)
        owner.register_buffer(name, value, persistent=False)
