"""The objects of a model whose attributes are its Python state, each by its path::

    class Policy:                       state_owners(model):
        def __init__(self):               ("", model), ("layers", ...), ("layers.0", ...),
            self.n = 0                    ("policy", model.policy)
    class Model(nn.Module):
        def __init__(self):             owner_at(model, "policy") is model.policy, so a
            self.layers = ...             counter ``self.n += 1`` in ``Policy.apply`` is the
            self.policy = Policy()        state ``policy.n``, measured, replayed and
                                          verified like a module's ``self.n``

A module's attributes are state; so are those of a plain object (an instance of a user
class, ``object_state.user_class``) the model holds in an attribute, followed through
attributes of such objects too. Each object is listed once, at the first path that reaches
it (modules in ``named_modules`` order first), so a change is measured and replayed at one
place. A plain object held as an attribute is read by identity where its holder's
attributes are read: its own attributes are read at its own path.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from .object_state import instance_dict, running_thread, user_class

MAX_DEPTH = 3  # plain objects in plain objects followed this deep from a module
MAX_OWNERS = 4096  # plain objects listed at most (a big object graph stays cheap)


def plain_object(value) -> bool:
    """An instance of a user class with its own ``__dict__``: state an attribute path
    reaches (not a module, tensor, class or function, not a running thread's object)."""
    return (not isinstance(value, torch.nn.Module | torch.Tensor | type)
            and user_class(type(value)) and not running_thread(value)
            and instance_dict(value) is not None)


def state_owners(model: torch.nn.Module) -> Iterator[tuple[str, object]]:
    """``(path, owner)``: every module of ``model`` (``""`` for the model), then every plain
    object its modules hold in attributes, and the plain objects those hold, by path."""
    seen: set[int] = set()
    modules = list(model.named_modules())
    for path, module in modules:
        seen.add(id(module))
        yield path, module
    frontier = [(path, module, 0) for path, module in modules]
    listed = 0
    while frontier and listed < MAX_OWNERS:
        path, holder, depth = frontier.pop(0)
        if depth >= MAX_DEPTH:
            continue
        attributes = instance_dict(holder)
        for name, value in list(dict.items(attributes or {})):
            if id(value) in seen or not isinstance(name, str) or not plain_object(value):
                continue
            seen.add(id(value))
            where = f"{path}.{name}" if path else name
            listed += 1
            yield where, value
            frontier.append((where, value, depth + 1))


def owner_at(model: torch.nn.Module, path: str):
    """The module or plain object at ``path`` (``state_owners``' naming); AttributeError
    naming the first step that is missing."""
    owner = model
    for step in path.split(".") if path else ():
        if isinstance(owner, torch.nn.Module) and step in owner._modules:
            owner = owner._modules[step]
            continue
        attributes = instance_dict(owner)
        if attributes is None or step not in attributes:
            raise AttributeError(f"{type(owner).__name__} has no attribute or submodule "
                                 f"{step!r} (looking up {path!r})")
        owner = attributes[step]
    return owner


def owned_attributes(model: torch.nn.Module) -> Iterator[tuple[str, object, str, object,
                                                                 bool]]:
    """``(path, owner, name, value, listed)`` for each attribute of each owner
    (``state_owners``); ``listed``: the value is itself an owner, read at its own path (its
    holder reads it by identity, ``owner_reading``)."""
    owners = list(state_owners(model))
    ids = {id(owner) for _, owner in owners if not isinstance(owner, torch.nn.Module)}
    for path, owner in owners:
        for name, value in list(dict.items(instance_dict(owner) or {})):
            if isinstance(name, str):
                yield path, owner, name, value, id(value) in ids


def owner_reading(value, identity: bool = True) -> tuple:
    """A listed owner as its holder's attribute reads it: its class and (``identity``) the
    object itself, so a holder rebound to a new object is a change there."""
    return ("owner", type(value).__qualname__, *((id(value),) if identity else ()))


def holder_keys(path: str) -> list[tuple[str, str]]:
    """``(holder path, name)`` of each attribute on the way to the owner at ``path``
    (``"a.b"``: ``("<root>", "a")``, ``("a", "b")``), as ``readings.attributes_state`` keys
    them; a module's step has none there (modules are not attributes it reads)."""
    steps = path.split(".") if path and path != "<root>" else []
    return [(".".join(steps[:i]) or "<root>", step) for i, step in enumerate(steps)]


def covered(path: str, paths) -> bool:
    """Whether a dotted ``path`` lies inside one of ``paths`` (``plan.levels`` inside
    ``plan``): state named by its holder (replayed, declared scratch, reported there)."""
    return any(path.startswith(f"{p}.") for p in paths)
