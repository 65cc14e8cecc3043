"""Drop scalar reads of constants that nothing uses.

torch.export leaves ``aten.item`` calls in the graph for Python arithmetic on sizes done
through tensors (Longformer: ``torch.div(seq_len, window, rounding_mode="trunc")`` used as
a view size). Export specialises the size to the constant, so the read's value is unused,
but the node stays: ``torch.compile`` of the module then refuses it ("torch.* op returned
non-Tensor"), AOTInductor emits C++ that does not compile, and on a GPU each one would be
a host sync that also blocks CUDA graph capture.

A read is removed only when nothing uses its value and its input is computed from literals
alone (no graph input, parameter, buffer or random op in its ancestry), so its value was
fixed when the graph was traced: removing it cannot change what the graph computes. The
constant arithmetic that fed it goes too, once unused.
"""

from __future__ import annotations

import torch

SCALAR_READS = (torch.ops.aten.item.default, torch.ops.aten._local_scalar_dense.default)


def _is_constant(node: torch.fx.Node, known: dict[torch.fx.Node, bool]) -> bool:
    if node not in known:
        known[node] = (node.op == "call_function"
                       and isinstance(node.target, torch._ops.OpOverload)
                       and not node.is_impure()
                       and not node.target._schema.is_mutable
                       and not node.target.is_view  # keep it simple: fresh values only
                       and all(_is_constant(n, known) for n in node.all_input_nodes))
    return known[node]


def drop_dead_constant_reads(gm: torch.fx.GraphModule) -> int:
    """Remove unused scalar reads of literal-only values from ``gm`` and every subgraph
    (cond/while_loop branches). Returns how many reads were removed."""
    removed = 0
    for module in gm.modules():
        if isinstance(module, torch.fx.GraphModule):
            removed += _drop_in(module)
    return removed


def _drop_in(gm: torch.fx.GraphModule) -> int:
    known: dict[torch.fx.Node, bool] = {}
    reads = [n for n in gm.graph.nodes
             if n.op == "call_function" and n.target in SCALAR_READS and not n.users
             and all(_is_constant(i, known) for i in n.all_input_nodes)]
    for node in reads:
        feeders = node.all_input_nodes
        gm.graph.erase_node(node)
        _erase_unused(gm.graph, feeders, known)
    if reads:
        gm.recompile()
    return len(reads)


def _erase_unused(graph: torch.fx.Graph, nodes: list[torch.fx.Node],
                  known: dict[torch.fx.Node, bool]) -> None:
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if node.graph is graph and not node.users and known.get(node):
            feeders = node.all_input_nodes
            graph.erase_node(node)
            known.pop(node)
            stack.extend(feeders)
