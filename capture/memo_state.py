"""Memo state: attributes a forward keeps only to skip recomputing them.

    if self.dynamic or self.shape != shape:             # ultralytics' detection heads
        self.anchors, self.strides = make_anchors(...)
        self.shape = shape

    if key not in self.attention_bias_cache:            # timm's LeViT
        self.attention_bias_cache[key] = self.attention_biases[:, self.idxs]

The old value is read, so this is not state set on every call (``rebound.py``), and a
program traced with the cache warm would hold the examples' values. But the values are
recomputed whenever the cache does not hold them, and what they hold is what recomputing
gives. ``memo_values`` checks exactly that, on the examples: each call run from the cache as
the model was given ("cold": recomputed) gives the same outputs, and leaves the same values
in the attributes, as the calls run in sequence on a model keeping its cache ("warm"). The
sequence runs each example twice in a row, then the first again, so the cache is hit as well
as missed. Where it holds, stitch traces from the cold values (the graph recomputes them on
every call) and the epilogue sets the attributes after the graph as eager leaves them
(``stitch/python_state.py``; verified like any state the epilogue sets).

A model given warm (called before the export, as users do to try it) holds the cache of its
last call, and a trace from that value tests the cache's key, a size, against the example's:
torch.export makes that a guard. Where the instance's value shadows a default its class
declares (``shape = None`` in the class body), the class's default is tried first as the cold
value: the value a model has before its first call, from which every call recomputes.

Limits: an attribute the forward creates (absent before the first call: a ``hasattr`` memo)
has no cold value to trace from and is not taken here; a model given warm whose default is
set in ``__init__`` (not in the class body) is traced from its warm value, which under
oblivious sizes can leave a guard on the size its last call had.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

import torch
from torch.utils import _pytree as pytree

from .isolation import preserved_rng, reset_examples, silenced_output
from .owners import owner_at

_ABSENT = object()


def cold_values(model: torch.nn.Module, places: Iterable[tuple[str, str]]) -> dict:
    """(path, name) -> a copy of the value the attribute holds now (an instance's own, or
    its class's default); places holding none are left out."""
    out = {}
    for path, name in places:
        owner = owner_at(model, path)
        value = getattr(owner, name, _ABSENT)
        if value is not _ABSENT:
            out[(path, name)] = _copied(value)
    return out


def class_defaults(model: torch.nn.Module, places: Iterable[tuple[str, str]]) -> dict:
    """(path, name) -> a copy of the plain value the owner's class declares for the
    attribute, where the instance holds its own value over it."""
    out = {}
    for path, name in places:
        owner = owner_at(model, path)
        own = getattr(owner, "__dict__", {})
        if name not in own:
            continue
        for klass in type(owner).__mro__:
            if name in vars(klass):
                default = vars(klass)[name]
                if plain_tree(default):
                    out[(path, name)] = _copied(default)
                break
    return out


def set_cold(model: torch.nn.Module, cold: dict) -> None:
    """Put each attribute back to (a fresh copy of) its cold value, on the instance."""
    for (path, name), value in cold.items():
        setattr(owner_at(model, path), name, _copied(value))


def memo_values(model: torch.nn.Module, examples, places: Iterable[tuple[str, str]]) -> dict:
    """The cold values of ``places`` ((module path, name) in ``model``, taken as the model is
    now) where they are a memo on the examples (see the module's doc), else {}. The places
    are judged together: a cache is usually several attributes (a key and its values)."""
    places = list(places)
    now = cold_values(model, places)
    defaults = class_defaults(model, places)
    for values in ([{**now, **defaults}, now] if defaults else [now]):
        cold = _memo(model, examples, values)
        if cold:
            return cold
    return {}


def _memo(model: torch.nn.Module, examples, values: dict) -> dict:
    """``values`` (the plain ones) where, taken as the cold values, they are a memo on the
    examples, else {}."""
    cold = {p: v for p, v in values.items()  # created by the forward:
            if plain_tree(v)}  # not judged here
    if not cold or not examples:
        return {}
    sequence = [ex for e in examples for ex in (e, e)] + [examples[0]]
    try:
        warm = _runs(model, sequence, cold, reset_each=False)
        again = _runs(model, sequence, cold, reset_each=True)
    except Exception:  # noqa: BLE001 - the model's own failure: no verdict, not a memo
        return {}
    if all(same_value(a, b) for a, b in zip(warm, again, strict=True)):
        return cold
    return {}


def _runs(model: torch.nn.Module, sequence, cold: dict, reset_each: bool) -> list:
    """(outputs, the places' values) after each call of ``sequence`` on a copy of
    ``model`` starting cold; ``reset_each``: cold again before every call."""
    probe = copy.deepcopy(model)
    set_cold(probe, cold)
    seen = []
    with preserved_rng(), torch.no_grad(), silenced_output():
        for ex in sequence:
            if reset_each:
                set_cold(probe, cold)
            reset_examples(ex)
            out = probe(*ex.args, **ex.kwargs)
            values = {p: _copied(getattr(owner_at(probe, p[0]), p[1], _ABSENT))
                      for p in cold}
            seen.append((_copied(out), values))
    return seen


def cold_copy(value):
    """A fresh copy of a cold value, to trace or run from."""
    return _copied(value)


def _copied(value):
    """A copy that later calls cannot change (tensors detached and cloned)."""
    if value is _ABSENT:
        return value
    return pytree.tree_map(
        lambda v: v.detach().clone() if isinstance(v, torch.Tensor) else v,
        copy.copy(value) if type(value) in (dict, list) else value)


def changed_from(model: torch.nn.Module, after: torch.nn.Module,
                 attributes) -> list[tuple[str, str]]:
    """(path, name) of the ``attributes`` ((path, name, value) of ``after``, a copy of
    ``model`` that ran) whose value differs from the one ``model`` holds (its own or its
    class's): a cache filled on first use shows here, not as state changed on every call."""
    out = []
    for path, name, value in attributes:
        cold = getattr(owner_at(model, path), name, _ABSENT)
        if plain_tree(cold) and plain_tree(value) and not same_value(cold, value):
            out.append((path, name))
    return out


_PLAIN = (bool, int, float, str, type(None), torch.SymInt, torch.SymFloat, torch.SymBool)


def plain_tree(value) -> bool:
    """Tensors and plain values (numbers, strings, None) in lists, tuples, dicts and
    torch.Size: what the epilogue can set again from the graph's values."""
    if value is _ABSENT:
        return False
    try:
        leaves, spec = pytree.tree_flatten(value)
        pytree.treespec_dumps(spec)
    except Exception:  # noqa: BLE001 - an unregistered container: not such a value
        return False
    return all(isinstance(v, (torch.Tensor, *_PLAIN)) for v in leaves)


def same_value(a, b) -> bool:
    """Equal structure and equal leaves: tensors in dtype, shape and every element."""
    leaves_a, spec_a = pytree.tree_flatten(a)
    leaves_b, spec_b = pytree.tree_flatten(b)
    if spec_a != spec_b:
        return False
    for x, y in zip(leaves_a, leaves_b, strict=True):
        if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
            if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)
                    and x.dtype == y.dtype and x.shape == y.shape
                    and bool(torch.equal(x, y))):
                return False
        elif type(x) is not type(y) or not _plain_equal(x, y):
            return False
    return True


def _plain_equal(x, y) -> bool:
    """``x == y`` where that is a plain bool; anything else (an object holding tensors, a
    comparison that raises) is no verdict: not equal."""
    try:
        same = x == y
    except Exception:  # noqa: BLE001 - not comparable: no verdict
        return False
    return same if isinstance(same, bool) else False
