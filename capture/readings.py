"""Readings of the Python state a forward may change, to compare before and after runs:
fingerprints (cheap, structural: containers item by item, tensors by identity and version),
value copies (tensors cloned), and what counts as equal."""

from __future__ import annotations

import collections
import itertools
import types

import torch

from .object_state import instance_dict, user_class
from .owners import owned_attributes, owner_reading

SKIP = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type,
         types.MethodType, classmethod, staticmethod, property)
MODULE_INTERNALS = frozenset(torch.nn.Module().__dict__) | {"training"}


def torch_internal(module: torch.nn.Module, name: str) -> bool:
    """A private attribute of one of torch's own module classes: its bookkeeping, not the
    model's state (``nn.LSTM``'s ``_flat_weight_refs``, rebuilt from its parameters)."""
    return name.startswith("_") and (type(module).__module__ or "").startswith("torch.")


def fingerprint(value, depth: int = 0, objects: bool = False):
    """A structural reading, two levels deep: containers item by item, tensors by identity
    and version, anything else by identity — and, with ``objects``, a user object
    (``object_state.user_class``) by identity and its attributes (``TRACK.n += 1``)."""
    if isinstance(value, torch.Tensor):
        return ("tensor", id(value), value._version)
    if isinstance(value, bool | int | float | complex | str | bytes | type(None)):
        return ("value", value)
    if depth < 2 and isinstance(value, list | tuple | collections.deque):
        return ("seq", id(value), len(value),
                tuple(fingerprint(v, depth + 1, objects)
                      for v in itertools.islice(value, 256)))
    if depth < 2 and isinstance(value, dict):
        return ("map", id(value), len(value),
                tuple((repr(k)[:64], fingerprint(v, depth + 1, objects))
                      for k, v in list(dict.items(value))[:256]))  # no overridden lookups
    if depth < 2 and isinstance(value, set | frozenset | bytearray):
        return ("set", id(value), len(value))
    attributes = instance_dict(value) if objects and depth < 2 else None
    if attributes is not None and user_class(type(value)) \
            and not isinstance(value, torch.nn.Module | type | types.FunctionType):
        return ("object", id(value), tuple((k, fingerprint(v, depth + 1, objects))
                                           for k, v in list(dict.items(attributes))[:256]))
    return ("object", id(value))


def globals_state(modules) -> dict:
    return {(m.__name__, k): fingerprint(v, objects=True) for m in modules for k, v in vars(m).items()
            if not k.startswith("__") and not isinstance(v, SKIP)}


def attributes_state(model: torch.nn.Module) -> dict:
    """A fingerprint of each plain attribute of the model's modules and of the plain
    objects they hold (``owners.state_owners``), by (owner path, name)."""
    return {(path or "<root>", k): owner_reading(v) if listed else fingerprint(v)
            for path, m, k, v, listed in owned_attributes(model) if _plain(m, k, v)}


def _plain(owner, name: str, value) -> bool:
    """An attribute that is state: not a module's bookkeeping, a submodule or code."""
    return (name not in MODULE_INTERNALS and not isinstance(value, (torch.nn.Module, *SKIP))
            and not (isinstance(owner, torch.nn.Module) and torch_internal(owner, name)))


def attribute_values(model: torch.nn.Module) -> dict:
    """Each attribute's value as of now (tensors cloned; lists/tuples of them copied)."""
    def copy(v):
        if isinstance(v, torch.Tensor):
            return v.detach().clone()
        if type(v) in (list, tuple):
            return type(v)(copy(x) for x in v)
        if type(v) is dict:  # a dict whose items follow the input (the same dict object)
            return {k: item(x) for k, x in dict.items(v)}
        return v

    def item(x):  # a user object in a dict: read with its attributes (changed in place)
        return fingerprint(x, 1, objects=True) if user_class(type(x)) and instance_dict(
            x) is not None and not isinstance(x, torch.nn.Module) else copy(x)

    return {(path or "<root>", k): owner_reading(v) if listed else copy(v)
            for path, m, k, v, listed in owned_attributes(model) if _plain(m, k, v)}


def equal(a, b, dicts: bool = False) -> bool:
    """Same value: tensors equal in dtype, shape, device and every element; lists/tuples
    item by item (``dicts``: dicts too, key by key); plain numbers and strings by ``==``;
    modules, functions and classes by identity, bound methods by ``==`` (the same function
    of the same object). Anything else is not compared — except with ``dicts``, which
    compares a dict's items as a fingerprint reads them: an object by identity (a memo's
    entry, made once and read by later calls, is the same object on every call)."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
                and a.dtype == b.dtype and a.shape == b.shape and a.device == b.device
                and bool(torch.equal(a, b)))
    if type(a) in (list, tuple, torch.Size) and type(b) is type(a):
        return len(a) == len(b) and all(equal(x, y, dicts) for x, y in zip(a, b, strict=True))
    if dicts and type(a) is dict and type(b) is dict:
        return list(a) == list(b) and all(equal(a[k], b[k], dicts) for k in a)
    if isinstance(a, bool | int | float | str | type(None)):
        return type(a) is type(b) and a == b
    if isinstance(a, types.FunctionType | types.BuiltinFunctionType | type):
        return a is b  # code, not state (a dispatch table of activations: Gemma 4's RoPE
        # init functions); what a function closes over is a slot of its own
    if isinstance(a, types.MethodType):
        return type(b) is types.MethodType and a == b
    if isinstance(a, torch.nn.Module):  # its own state is scanned as a module: by identity
        # (MaskFormer 4.52's ``self.layers = [conv, norm, act]``, also registered as
        # submodules, holds equal items on every call)
        return a is b
    return dicts and a is b


def list_attributes(model: torch.nn.Module) -> list[tuple[str, str, list]]:
    """``(owner path, attribute, list)`` for each plain list a module of ``model``, or a
    plain object it holds (``owners.state_owners``), holds as an attribute."""
    return [(path, k, v) for path, _m, k, v, _listed in owned_attributes(model)
            if type(v) is list]


def lists(model: torch.nn.Module) -> dict:
    return {(path or "<root>", k): (v, list.copy(v)) for path, k, v in list_attributes(model)}


def only_appended(before: tuple | None, now) -> bool:
    """The same list object, longer, its old items still in place (identity)."""
    if before is None:
        return False
    obj, items = before
    return (now is obj and len(now) > len(items)
            and all(a is b for a, b in zip(now, items, strict=False)))
