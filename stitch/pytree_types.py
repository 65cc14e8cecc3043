"""Library containers that torch.export must know as pytrees: transformers' caches, and
dataclasses of tensors a model takes or returns.

A transformers 5.x decoder returns its key/value cache as a ``DynamicCache`` (and takes one
as ``past_key_values``; encoder-decoders return an ``EncoderDecoderCache`` of two). torch.export refuses a type it cannot flatten ("Found <class
DynamicCache> in output, which is not a known type"); transformers ships the registration
itself (``register_dynamic_cache_export_support``). stitch calls it when a model's inputs or
outputs hold such a type — a process-wide registration, noted in the report — and records
the types an artifact's signature uses, so ``stitch.load`` registers them before loading.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import sys
from typing import Any

import torch.utils._pytree as pytree

from .errors import StitchError

# type (module.qualname) -> (module, function) that registers it with torch's pytree
REGISTRARS: dict[str, tuple[str, str]] = {
    "transformers.cache_utils.DynamicCache":
        ("transformers.integrations.executorch", "register_dynamic_cache_export_support"),
    "transformers.cache_utils.EncoderDecoderCache":
        ("stitch.pytree_types", "register_encoder_decoder_cache"),
}


def register_encoder_decoder_cache() -> None:
    """Seq2seq models' cache (transformers registers only DynamicCache): its two
    DynamicCaches are its children."""
    from transformers.cache_utils import EncoderDecoderCache
    from transformers.integrations.executorch import register_dynamic_cache_export_support

    register_dynamic_cache_export_support()
    if EncoderDecoderCache in pytree.SUPPORTED_NODES:
        return
    pytree.register_pytree_node(
        EncoderDecoderCache,
        lambda c: ([c.self_attention_cache, c.cross_attention_cache], None),
        lambda children, _context: EncoderDecoderCache(*children),
        serialized_type_name=qualified(EncoderDecoderCache),
        flatten_with_keys_fn=lambda c: ([(pytree.GetAttrKey("self_attention_cache"),
                                          c.self_attention_cache),
                                         (pytree.GetAttrKey("cross_attention_cache"),
                                          c.cross_attention_cache)], None))


def qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def unregistered(values: Any) -> list[str]:
    """Types in ``values`` stitch knows how to register that torch's pytree does not know:
    those ``REGISTRARS`` names, and dataclasses (kornia's ``DISKFeatures``: a record of
    tensors, registered by its ``__init__`` fields, rebuilt by calling the class)."""
    return sorted({qualified(type(leaf)) for leaf in pytree.tree_leaves(values)
                   if (qualified(type(leaf)) in REGISTRARS or _dataclass(type(leaf)))
                   and type(leaf) not in pytree.SUPPORTED_NODES})


def _dataclass(cls: type) -> bool:
    return dataclasses.is_dataclass(cls) and isinstance(cls, type)


_OPS = "torch.ops."  # an entry naming a library of operators the graph calls
_TORCH_OPS = frozenset({"aten", "prims", "higher_order", "_ops", "quantized", "_c10d_functional",
                        "_quantized", "profiler", "_prims"})
_BUILTIN_MODULES = ("builtins", "collections", "torch", "typing")


def register(names: list[str]) -> None:
    """Before loading an artifact: register each type its signature uses (``spec_types``)
    and load each operator library its graph calls (``op_libraries``). A type stitch knows
    how to register is registered; any other type's module is imported (transformers'
    output classes register themselves when defined), and a dataclass it defines that is
    still unknown is registered by its ``__init__`` fields; a library is imported by its
    name (``torch.ops.torchvision``: ``torchvision``)."""
    for name in names:
        if name in REGISTRARS:
            module, function = REGISTRARS[name]
            getattr(importlib.import_module(module), function)()
        elif name.startswith(_OPS):
            _import(name[len(_OPS):], f"the artifact's graph calls {name} operators")
        elif not _imported_type(name) and not _registered_dataclass(name):
            raise StitchError(f"the artifact's inputs/outputs use {name}, which is not a "
                              "pytree type in this process (importing its module did not "
                              f"register it); stitch registers {', '.join(REGISTRARS)}. "
                              "Register it (torch.utils._pytree.register_pytree_node) first.")


def _registered_dataclass(name: str) -> bool:
    """Register the dataclass ``name`` (``module.Qualname``, its module imported by
    ``_imported_type``) by its ``__init__`` fields; whether it is one."""
    parts = name.split(".")
    for end in range(len(parts) - 1, 0, -1):
        value = sys.modules.get(".".join(parts[:end]))
        if value is None:
            continue
        for attr in parts[end:]:
            value = getattr(value, attr, None)
        if not (isinstance(value, type) and _dataclass(value)):
            return False
        if value not in pytree.SUPPORTED_NODES:
            pytree.register_dataclass(value, serialized_type_name=name)
        return True
    return False


def _import(module: str, why: str) -> None:
    try:
        importlib.import_module(module)
    except ImportError as e:
        raise StitchError(f"{why}, defined by the Python package {module!r}, which this "
                          f"process cannot import ({e}); install it where the artifact "
                          "runs") from None


def _imported_type(name: str) -> bool:
    """Import the longest importable module prefix of ``name`` (a ``module.Qualname``);
    whether torch's pytree then knows the type by that name."""
    parts = name.split(".")
    for end in range(len(parts) - 1, 0, -1):
        try:
            importlib.import_module(".".join(parts[:end]))
            break
        except ImportError:
            continue
    return any(qualified(t) == name for t in pytree.SUPPORTED_NODES)


def spec_types(*specs: pytree.TreeSpec | None) -> list[str]:
    """The library types a signature's tree specs contain: those stitch registers, and any
    other registered class outside Python's and torch's own (transformers' output classes),
    which ``register`` imports."""
    found: set[str] = set()
    stack = [s for s in specs if s is not None]
    while stack:
        spec = stack.pop()
        kind = spec.type
        if kind is not None and (qualified(kind) in REGISTRARS or (
                kind.__module__.split(".")[0] not in _BUILTIN_MODULES
                and kind in pytree.SUPPORTED_NODES)):
            found.add(qualified(kind))
        stack.extend(spec.children())
    return sorted(found)


def op_libraries(graph_module) -> list[str]:
    """``torch.ops.<namespace>`` for each operator library outside torch that the graph (its
    subgraphs included) calls: ``torchvision``'s ``nms``, which ``register`` loads by
    importing the package of that name."""
    found: set[str] = set()
    for module in graph_module.modules():
        for node in getattr(getattr(module, "graph", None), "nodes", ()):
            namespace = getattr(node.target, "namespace", None) if node.op == "call_function" \
                else None
            if namespace and namespace not in _TORCH_OPS \
                    and importlib.util.find_spec(namespace) is not None:
                found.add(f"{_OPS}{namespace}")
    return sorted(found)
