"""Symbolic-number ops torch.export emits but cannot serialize, written as ones it can.

Python's ``sum`` over sizes inside a ``torch.cond`` arm (Dynamo traces the arms) becomes
``torch.sym_sum(...)``, which ``torch.export.save`` refuses ("op sym_sum is not in _SYM_OPS":
``torch/_export/serde/serialize.py`` lists no n-ary sum), so the program could not be saved,
packaged or shipped. It is the same number as a chain of ``operator.add``, which serializes;
every graph of the program (the arms too) is rewritten so, in place. Reproduction without
stitch: ``experiments/repro_sym_sum_save.py``.
"""

from __future__ import annotations

import operator

import torch


def _value(arg):
    return arg.meta.get("val") if isinstance(arg, torch.fx.Node) else arg


def serializable_sym_ops(gm: torch.fx.GraphModule) -> int:
    """Each ``torch.sym_sum(items)`` in ``gm`` and its subgraphs replaced by
    ``items[0] + items[1] + ...``; how many were replaced."""
    replaced = 0
    for module in gm.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        sums = [n for n in module.graph.nodes
                if n.op == "call_function" and n.target is torch.sym_sum]
        for node in sums:
            _as_adds(module.graph, node)
        if sums:
            module.recompile()
            replaced += len(sums)
    return replaced


def _as_adds(graph: torch.fx.Graph, node: torch.fx.Node) -> None:
    items = list(node.args[0]) if node.args else []
    total, value = (items[0], _value(items[0])) if items else (0, 0)
    with graph.inserting_before(node):
        for item in items[1:]:
            right = _value(item)
            value = value + right if value is not None and right is not None else None
            total = graph.call_function(operator.add, (total, item))
            total.meta.update(node.meta)
            total.meta["val"] = value
    if isinstance(total, torch.fx.Node):
        if "val" in node.meta:
            total.meta["val"] = node.meta["val"]  # the sum as torch.export traced it
        node.replace_all_uses_with(total)
    else:
        _replace_with_constant(node, total)
    graph.erase_node(node)


def _replace_with_constant(node: torch.fx.Node, value) -> None:
    """Uses of a sum of no nodes (constants only) take the constant."""
    for user in list(node.users):
        user.args = torch.fx.node.map_arg(user.args, lambda a: value if a is node else a)
        user.kwargs = torch.fx.node.map_arg(user.kwargs, lambda a: value if a is node else a)
