"""Dicts a forward changes item by item, the same dict object on every call::

    self.stats["last"] = h.mean()     # an item set to a value the call computes
    COUNTS["calls"] += 1              # an item only ever added to (a counter in a dict)

torch.export drops both. When no call reads an item it changes other than to add to it (a
counter), the epilogue can replay each change exactly: set the item to the graph's value,
or add the same numbers. Which items change, and how, is measured, not guessed: the forward
runs once more with each such dict replaced by a probe that holds its items but hands out,
for an item some call changes and this call has not set yet, a ``Counting`` stand-in (only
additions allowed); membership tests, iteration, ``len``, ``pop`` and the like on the dict
count as reads. A key is replayed when every call that touches it sets it (``"set"``) or
every one adds to it (``"add"``); anything else refuses the dict, naming the key.
"""

from __future__ import annotations

from .rebound import Counting, ReadBeforeSet, addends

_JSON_KEYS = (str, int)


class ItemProbe(dict):
    """Stands in for a dict during one call: reads of changed items before this call sets
    them give a ``Counting``; sets are kept here (the call's later reads see them)."""

    def __init__(self, items: dict, name: str, changed: set, read: set[str]) -> None:
        super().__init__(items)
        self._name, self._changed, self._read = name, changed, read
        self.set_now: dict = {}

    def _stand_in(self, key) -> Counting:
        return Counting(f"{self._name}[{key!r}]", self._read)

    def __getitem__(self, key):
        if key in self.set_now:
            return self.set_now[key]
        if key in self._changed and dict.__contains__(self, key):
            return self._stand_in(key)
        return dict.__getitem__(self, key)

    def get(self, key, default=None):
        if key in self.set_now or (key in self._changed and dict.__contains__(self, key)):
            return self[key]
        if key in self._changed:
            return self._other(key)
        return dict.get(self, key, default)

    def __setitem__(self, key, value) -> None:
        self.set_now[key] = value

    def update(self, other=(), **more) -> None:
        for key, value in dict(other, **more).items():
            self[key] = value

    def _other(self, *args, **kwargs):
        self._read.add(self._name)
        raise ReadBeforeSet(self._name)

    def __contains__(self, key) -> bool:
        if key in self._changed:  # `if k not in d: d[k] = 0` decides on the dict's past
            return self._other(key)
        return dict.__contains__(self, key)

    __iter__ = __len__ = __delitem__ = keys = items = values = _other
    pop = popitem = setdefault = clear = copy = __or__ = __ior__ = _other


def changed_keys(before: dict, now: dict) -> set:
    """The keys whose item ``now`` holds another object than ``before`` did (or new)."""
    return {k for k in now if k not in before or now[k] is not before[k]}


def how_set(probe: ItemProbe) -> dict:
    """``key -> ("set", value) | ("add", addends)`` for what this call did to each item
    (a ``Counting`` of another key, or of an item it did not hold, counts as a set)."""
    out = {}
    for key, value in probe.set_now.items():
        added = addends(value)
        named = added is not None and object.__getattribute__(value, "_name") == \
            f"{probe._name}[{key!r}]"
        out[key] = ("add", added) if named else ("set", value)
    return out


def item_changes(run, places: dict[str, tuple]) -> tuple[dict[str, dict], dict[str, str]]:
    """``(replayable, why_not)``: for each of ``places`` (name -> (get, set, changed keys)),
    ``key -> "set" | "add"`` when every call that touches a key does the same thing to it
    and nothing else reads the dict's changed items; otherwise the reason, for the
    refusal. Each dict holds a fresh ``ItemProbe`` during each example; put back after."""
    read: set[str] = set()
    originals = {name: get() for name, (get, _put, _keys) in places.items()}
    seen: dict[str, dict] = {name: {} for name in places}
    why: dict[str, str] = {}

    def fresh() -> None:
        for name, (_get, put, keys) in places.items():
            put(ItemProbe(originals[name], name, set(keys), read))

    def after_each() -> None:
        for name, (get, _put, _keys) in places.items():
            for key, (how, _value) in how_set(get()).items():
                if seen[name].setdefault(key, how) != how:
                    why.setdefault(name, f"item {key!r} is set on some calls and added to "
                                         "on others")
        fresh()

    fresh()
    try:
        run(after_each)
    except Exception:  # noqa: BLE001 - a read of a changed item, or the model failed
        if not read:
            read |= set(places)
    finally:
        for name, (_get, put, _keys) in places.items():
            put(originals[name])
    for name in places:
        if any(r == name or r.startswith(f"{name}[") for r in read) or not seen[name]:
            why.setdefault(name, "the forward reads items it changes (other than adding to "
                                 "them), or tests, iterates or pops the dict")
        bad = [k for k in seen[name] if not isinstance(k, _JSON_KEYS) or isinstance(k, bool)]
        if bad:
            why.setdefault(name, f"key {bad[0]!r} is not a str or int (the epilogue is JSON)")
    return {n: seen[n] for n in places if n not in why}, why
