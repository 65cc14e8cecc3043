"""Sizes read from data, hinted to Inductor with the values the examples gave them.

Inductor sizes a kernel by its loops' hints. An ``.item()`` read is an unbacked symbol, with
no hint: Inductor assumes 8192 and parallelises the loops it sizes over OpenMP threads
(``#pragma omp parallel`` for ``arange(u1)``), which on tiny tensors and a busy machine wait
for a descheduled thread: milliseconds a call where eager takes microseconds. This copies a
piece with each read followed by ``torch._dynamo.override_optimization_hint(read, largest
value the recorded calls read)``, a call Dynamo applies while tracing and records no node
for::

    item = torch.ops.aten.item.default(full_1)
    override_optimization_hint(item, 3)        # added; the largest read seen

Reads of a float or a bool are not hinted (they size nothing).
"""

from __future__ import annotations

import copy

import torch

READS = (torch.ops.aten.item.default, torch.ops.aten._local_scalar_dense.default)


class _Reads(torch.fx.Interpreter):
    def __init__(self, module: torch.fx.GraphModule, seen: dict) -> None:
        super().__init__(module)
        self.seen = seen

    def run_node(self, node):
        value = super().run_node(node)
        if node.op == "call_function" and node.target in READS and type(value) is int:
            self.seen[node.name] = max(value, self.seen.get(node.name, value))
        return value


def hinted(piece: torch.fx.GraphModule, calls: list) -> torch.fx.GraphModule:
    """``piece``, each integer read hinted by the largest value it read in ``calls``;
    ``piece`` itself where it reads none."""
    seen: dict[str, int] = {}
    for args in calls:
        _Reads(piece, seen).run(*args)
    if not seen:
        return piece
    piece = copy.deepcopy(piece)
    for node in list(piece.graph.nodes):
        if node.name in seen:
            with piece.graph.inserting_after(node):
                piece.graph.call_function(torch._dynamo.override_optimization_hint,
                                          (node, max(seen[node.name], 1)))
    piece.recompile()
    return piece
