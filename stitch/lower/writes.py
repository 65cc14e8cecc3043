"""Which graph nodes write a buffer in place: shared by the ONNX state lifting and the
CUDA-graph check (``torch.export`` in torch 2.14 keeps ``copy_``/``add_`` on buffers in the
graph instead of listing them in ``buffers_to_mutate``)."""

from __future__ import annotations

from collections.abc import Iterator

import torch


def buffer_writes(graph: torch.fx.Graph,
                  buffer_of: dict[str, str]) -> Iterator[tuple[torch.fx.Node, str]]:
    """Each (node, buffer name) where a mutable op writes a buffer input in place.

    ``buffer_of`` maps placeholder names to buffer names (``inputs_to_buffers``)."""
    for node in graph.nodes:
        schema = getattr(node.target, "_schema", None)
        if node.op != "call_function" or schema is None or not schema.is_mutable:
            continue
        for arg, value in zip(schema.arguments, node.args, strict=False):
            written = arg.alias_info is not None and arg.alias_info.is_write
            if written and isinstance(value, torch.fx.Node) and value.name in buffer_of:
                yield node, buffer_of[value.name]
