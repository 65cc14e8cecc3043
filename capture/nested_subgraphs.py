"""A cond arm's own subgraphs are kept when torch deletes a graph module's unused
submodules, while stitch traces.

``GraphModule.delete_all_unused_submodules`` (torch 2.14.1) counts a submodule as used when
the module's own graph names it, or when it sits under a module a ``call_module`` node
calls. A cond's arms are reached by ``get_attr`` nodes, and the conds nested in an arm are
named only by the arm's own graph, so they count as unused and are deleted. torch.export's
``replace_set_grad_with_hop_pass`` calls it after inlining each grad-mode region: any graph
with a cond nested in a cond's arm and a ``torch.no_grad()`` region after it (a rotary
embedding's ``@torch.no_grad()``, a router's) then failed with ``AttributeError: '<lambda>'
object has no attribute 'true_graph_0'``, plain torch.export included (LongCat-Flash's
stitched experts loop: a ``continue`` inside a loop over ``nonzero()``). The same bug is
reported for torchao's pt2e convert (pytorch/ao#4455).

While ``nested_subgraphs_kept()`` is active, the children of every module a ``get_attr``
node of the graph names, and theirs, are put back after torch's deletion: those modules
stay, so what their graphs name stays with them. Nothing else changes; the patch is
re-entrant and undone when the last user leaves.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from .reentrant import Reentrant

_ORIGINAL = torch.fx.GraphModule.delete_all_unused_submodules
_PATCH = Reentrant()


def _keeping_nested(self: torch.fx.GraphModule) -> None:
    kept: list[tuple[torch.nn.Module, dict]] = []
    for node in self.graph.nodes:
        if node.op == "get_attr" and isinstance(node.target, str):
            try:  # a parameter or a constant: not a module
                held = self.get_submodule(node.target)
            except AttributeError:
                continue
            kept += [(m, dict(m._modules)) for m in held.modules()]
    _ORIGINAL(self)
    for module, children in kept:
        for name, child in children.items():
            if name not in module._modules:
                module._modules[name] = child


@contextlib.contextmanager
def nested_subgraphs_kept() -> Iterator[None]:
    with _PATCH.active((torch.fx.GraphModule, "delete_all_unused_submodules",
                        _keeping_nested)):
        yield
