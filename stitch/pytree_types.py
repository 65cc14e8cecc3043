"""Library containers that torch.export must know as pytrees: transformers' caches.

A transformers 5.x decoder returns its key/value cache as a ``DynamicCache`` (and takes one
as ``past_key_values``; encoder-decoders return an ``EncoderDecoderCache`` of two). torch.export refuses a type it cannot flatten ("Found <class
DynamicCache> in output, which is not a known type"); transformers ships the registration
itself (``register_dynamic_cache_export_support``). stitch calls it when a model's inputs or
outputs hold such a type — a process-wide registration, noted in the report — and records
the types an artifact's signature uses, so ``stitch.load`` registers them before loading.
"""

from __future__ import annotations

import importlib
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
    """Types in ``values`` stitch knows how to register that torch's pytree does not know."""
    return sorted({qualified(type(leaf)) for leaf in pytree.tree_leaves(values)
                   if qualified(type(leaf)) in REGISTRARS
                   and type(leaf) not in pytree.SUPPORTED_NODES})


def register(names: list[str]) -> None:
    for name in names:
        if name not in REGISTRARS:
            raise StitchError(f"the artifact's inputs/outputs use {name}, which stitch cannot "
                              f"register as a pytree; stitch knows {', '.join(REGISTRARS)}. "
                              "Register it (torch.utils._pytree.register_pytree_node) first.")
        module, function = REGISTRARS[name]
        getattr(importlib.import_module(module), function)()


def spec_types(*specs: pytree.TreeSpec | None) -> list[str]:
    """The registrable library types a signature's tree specs contain."""
    found: set[str] = set()
    stack = [s for s in specs if s is not None]
    while stack:
        spec = stack.pop()
        if spec.type is not None and qualified(spec.type) in REGISTRARS:
            found.add(qualified(spec.type))
        stack.extend(spec.children())
    return sorted(found)
