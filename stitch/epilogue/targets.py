"""Where deferred appends go (the list attributes a forward appends to), and where deferred
rebindings go (``rebind`` entries: capture/rebound.py).

A forward that does ``self.history.append(h.mean())`` keeps a value in a list attribute. The
exported graph returns the value; the epilogue's ``append`` entry names the list by its path
in the model (``"encoder.history"``). ``ListTargets`` resolves that path at every call on the
model it is bound to (as the model's own forward would: a list the user replaced or cleared
is the one appended to), or, when no model is bound (an artifact loaded in a server), on
lists it holds itself (``targets.lists``).
"""

from __future__ import annotations

import weakref

import torch

from capture.owners import owner_at, state_owners
from capture.reachable import MISSING, SlotKind
from capture.readings import list_attributes

from ..errors import StitchError

SHARED: dict = {}  # target -> capture.reachable.Slot: lists outside the model, this process
_SHARED_KINDS = ("class:", "global:", "closure:", "default:")
# the shared slots the export in progress registered: ``place_of_attribute`` consults only
# these (a slot an earlier export registered is that model's state, not this one's)
EXPORTING: set[str] = set()


# lists a forward can reach, by identity, while stitch.export runs: an append to one of them
# in a branch no example took gets its target here (``place_of``); id -> (list, place)
KNOWN: dict[int, tuple[list, object]] = {}
# targets of the lists the examples showed the export in progress appending to (deferred):
# a cond arm reading one is refused (synthesize/convert/arm_list_reads.py)
APPENDED: set[str] = set()
# the lists cond arms append to (branch_effects), as ("attr" or "name", name): a branch no
# example took may be the only one appending, and the forward's reads of such a list
# elsewhere are refused too
ARM_APPENDED: set[str] = set()
# the model stitch.export is working on (``place_of_attribute`` finds its modules' paths)
KNOWN_MODEL: list = []


def know_lists(model: torch.nn.Module | None, slots=(), appended=()) -> None:
    """Record the lists ``model``'s modules hold as attributes (placed by their path) and
    those in ``slots`` (class attributes, module globals, closure cells), and the targets of
    those it appends to (``appended``); None forgets, and ends the export in progress
    (``EXPORTING``)."""
    KNOWN.clear()
    KNOWN_MODEL.clear()
    APPENDED.clear()
    APPENDED.update(appended)
    if model is None:
        EXPORTING.clear()
        ARM_APPENDED.clear()
        return
    KNOWN_MODEL.append(model)
    for slot in slots:
        value = slot.get()
        if type(value) is list:
            KNOWN[id(value)] = (value, slot)
    for path, attr, value in list_attributes(model):
        if not attr.startswith("_"):
            KNOWN.setdefault(id(value), (value, f"{path}.{attr}" if path else attr))


def place_of(value: list) -> str | None:
    """The target naming ``value`` (a model attribute's path, or a shared slot, registered),
    or None when stitch does not know where the forward keeps it."""
    value_place = KNOWN.get(id(value))
    if value_place is None or value_place[0] is not value:
        return None
    place = value_place[1]
    if isinstance(place, str):
        return place
    register_shared([place])
    return place.target


def arm_targets(known: list[str]) -> list[str]:
    """Targets of the lists the forward can reach (``KNOWN``) named like a list a cond arm
    appends to (``ARM_APPENDED``), not in ``known``: stood in for while tracing, so a read
    of one outside the arm is refused as for the lists the examples appended to."""
    out = []
    for _value, place in list(KNOWN.values()):
        # an attribute receiver (``self.hist``) names a model or class attribute; a bare
        # name (``HISTORY``) a global, a closure cell or a default
        if isinstance(place, str):
            key = ("attr", place.rpartition(".")[2])
        else:
            key = ("attr" if place.kind == SlotKind.CLASS else "name", place.name)
        if key not in ARM_APPENDED:
            continue
        if not isinstance(place, str):  # a slot: resolvable, not state this export measured
            SHARED[place.target] = place
            place = place.target
        if place not in known and place not in out:
            out.append(place)
    return out


def place_of_attribute(owner, attr: str) -> str | None:
    """The target naming attribute ``attr`` of ``owner``: a module of the model being
    exported or a plain object it holds (its path, ``capture.owners``), or a class/module
    slot registered as state the forward sets; None when stitch does not know it."""
    for slot in (SHARED[t] for t in EXPORTING if t in SHARED):
        holder = getattr(slot, "holder", None)
        if slot.name == attr and (
                (slot.kind == SlotKind.CLASS and holder is owner)
                or (slot.kind == SlotKind.GLOBAL and holder is getattr(owner, "__dict__", None))):
            return slot.target
    if KNOWN_MODEL:
        for path, held in state_owners(KNOWN_MODEL[0]):
            if held is owner:
                return f"{path}.{attr}" if path else attr
    return None


# counters python_state measured (target -> the value it held when exported): a branch that
# adds to one of them is replayed by a guarded ``add`` entry (synthesize/convert/branch_state.py)
COUNTERS: dict[str, object] = {}


# counters and set state only paths no example took change (capture/untaken_state.py)
UNTAKEN: set[str] = set()


# memo state python_state found (target -> its cold value, capture/memo_state.py): traced
# from that value, so the graph recomputes the cache, and set again by the epilogue
MEMOS: dict[str, object] = {}


def know_memos(memos: dict[str, object]) -> None:
    MEMOS.clear()
    MEMOS.update(memos)


def know_counters(counters: dict[str, object], untaken=()) -> None:
    """Record the counters of the export in progress (target -> start value); ``untaken``:
    those only paths no example took add to."""
    COUNTERS.clear()
    COUNTERS.update(counters)
    UNTAKEN.clear()
    UNTAKEN.update(untaken)


ITEM_DICTS: set[str] = set()  # dicts python_state measured (targets): items replayed


def know_items(targets) -> None:
    """Record the dicts whose items the export in progress replays."""
    ITEM_DICTS.clear()
    ITEM_DICTS.update(targets)


def item_dict(name: str) -> bool:
    """Whether some measured dict is an attribute, slot or global named ``name``."""
    return any(t.rpartition(".")[2] == name for t in ITEM_DICTS)


def counter_attribute(attr: str) -> bool:
    """Whether some measured counter is an attribute (or slot) named ``attr``."""
    return any(t.rpartition(".")[2] == attr for t in COUNTERS)


def is_shared(target: str) -> bool:
    """A list kept outside the model's instances (on its class, in a module global, in a
    closure cell): one list for every copy of the model."""
    return target.startswith(_SHARED_KINDS)


def register_shared(slots) -> None:
    """Let targets naming these slots resolve in this process (stitch.export registers the
    slots a forward appends to)."""
    for slot in slots:
        SHARED[slot.target] = slot
        EXPORTING.add(slot.target)


def resolve_list(model: torch.nn.Module | None, target: str) -> list:
    """The list at ``target``: ``"sub.module.attr"`` in ``model``, or a shared slot."""
    if is_shared(target):
        slot = SHARED.get(target)
        value = slot.get() if slot is not None else None
        if not isinstance(value, list):
            raise StitchError(
                f"the epilogue appends to {target!r}, which is "
                + ("not known to this process (it lives in the Python state of the process "
                   "that exported the program)" if slot is None
                   else f"a {type(value).__name__} now, not a list")
                + "; unbind (targets.bind(None)) to keep the values in targets.lists")
        return value
    path, _, attr = target.rpartition(".")
    try:
        owner = owner_at(model, path)
        value = getattr(owner, attr)
    except AttributeError as e:
        raise StitchError(f"the epilogue appends to {target!r}, but the bound model has no "
                          f"such attribute ({e}); bind the model the program was exported "
                          "from, or unbind (targets.bind(None)) to keep the values in "
                          "targets.lists") from None
    if not isinstance(value, list):
        raise StitchError(f"the epilogue appends to {target!r}, which is a "
                          f"{type(value).__name__} in the bound model, not a list")
    return value


def _owner(model: torch.nn.Module, target: str):
    path, _, attr = target.rpartition(".")
    try:
        return owner_at(model, path), attr
    except AttributeError as e:
        raise StitchError(f"the epilogue sets {target!r}, but the bound model has no such "
                          f"module or object ({e}); bind the model the program was exported from, or "
                          "unbind (targets.bind(None)) to keep the values in "
                          "targets.values") from None


def rebind(model: torch.nn.Module | None, target: str, value) -> None:
    """Set the attribute (``"sub.module.attr"`` in ``model``) or shared slot at ``target``
    to ``value``, as the forward's own assignment did."""
    if is_shared(target):
        slot = SHARED.get(target)
        if slot is None:
            raise StitchError(f"the epilogue sets {target!r}, which is not known to this "
                              "process (it lives in the Python state of the process that "
                              "exported the program); unbind (targets.bind(None)) to keep "
                              "the values in targets.values")
        slot.set(value)
        return
    owner, attr = _owner(model, target)
    if _is_buffer(owner, attr):
        owner._buffers[attr] = value  # set as the forward's assignment sets it
        return
    object.__setattr__(owner, attr, value)  # a plain attribute, as the forward set it


def current(model: torch.nn.Module | None, target: str):
    """The value at ``target`` now (None when there is none)."""
    if is_shared(target):
        slot = SHARED.get(target)
        return slot.get() if slot is not None else None
    owner, attr = _owner(model, target)
    return owner._buffers[attr] if _is_buffer(owner, attr) else vars(owner).get(attr)


def _is_buffer(owner, attr: str) -> bool:
    """A buffer of the model at a target stitch's copy holds as an attribute (a table the
    forward sets to another shape, ``python_state.as_attributes``)."""
    return (isinstance(owner, torch.nn.Module) and attr in owner._buffers
            and attr not in vars(owner))


class ListTargets:
    """Where the epilogue's state goes: the lists ``append`` entries grow and the attributes
    ``rebind`` entries set, on the bound model (or shared slots), else held here
    (``lists``, ``values``)."""

    def __init__(self, model: torch.nn.Module | None = None, shared: bool = False) -> None:
        self.lists: dict[str, list] = {}
        self.values: dict[str, object] = {}
        # shared lists (class, global, closure) go to the real list even when unbound
        self.shared = shared
        self._model: weakref.ref | None = None
        self.bind(model)

    def bind(self, model: torch.nn.Module | None) -> None:
        """Send appends to ``model``'s list attributes (held weakly), or, with None, to
        ``self.lists``."""
        self._model = weakref.ref(model) if model is not None else None

    @property
    def model(self) -> torch.nn.Module | None:
        return self._model() if self._model is not None else None

    def __call__(self, target: str) -> list:
        model = self.model
        if model is not None or (self.shared and is_shared(target)):
            return resolve_list(model, target)
        return self.lists.setdefault(target, [])

    def rebind(self, target: str, value) -> None:
        """Set ``target`` to ``value`` (a ``rebind`` entry), where appends would go."""
        model = self.model
        if model is not None or (self.shared and is_shared(target)):
            rebind(model, target, value)
        else:
            self.values[target] = value

    def add(self, target: str, added, start=None, key=None) -> None:
        """Add ``added`` (numbers, in order) to the counter ``target`` (an ``add`` entry;
        with ``key``, to that item of the dict ``target``), where appends would go; held
        here, it starts from ``start`` (its value when exported)."""
        if key is not None:
            items = self._dict(target)
            items[key] = _added(items.get(key, start), added, f"{target}[{key!r}]")
            return
        model = self.model
        if model is not None or (self.shared and is_shared(target)):
            value = current(model, target)
        else:
            value = self.values.get(target, start)
        self.rebind(target, _added(value, added, target))

    def set_item(self, target: str, key, value) -> None:
        """Set item ``key`` of the dict ``target`` (a ``set_item`` entry)."""
        self._dict(target)[key] = value

    def _dict(self, target: str) -> dict:
        model = self.model
        if model is not None or (self.shared and is_shared(target)):
            found = current(model, target)
        else:
            found = self.values.setdefault(target, {})
        if not isinstance(found, dict):
            raise StitchError(f"the epilogue sets items of {target!r}, which holds a "
                              f"{type(found).__name__}, not a dict")
        return found

    def value(self, target: str):
        """What ``target`` holds now, where this object sends ``rebind`` entries."""
        model = self.model
        if model is not None or (self.shared and is_shared(target)):
            return current(model, target)
        return self.values.get(target)


def _added(value, added, what: str):
    if value is MISSING:  # ``type(self).count += 1`` on a count a base class holds
        raise StitchError(f"the epilogue adds to {what!r}, which that class does not hold "
                          "itself (it inherits the value from a base class, and the "
                          "forward's `+=` makes the class's own): stitch replays counters "
                          "a class holds; set it on the class itself, or keep it in a buffer")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise StitchError(f"the epilogue adds to {what!r}, which holds a "
                          f"{type(value).__name__}, not a number")
    for number in added:
        value = value + number
    return value
