"""Symbolic-number ops torch.export emits but cannot serialize, written as ones it can.

Python's ``sum`` over sizes inside a ``torch.cond`` arm (Dynamo traces the arms) becomes
``torch.sym_sum(...)``, which ``torch.export.save`` refuses ("op sym_sum is not in _SYM_OPS":
``torch/_export/serde/serialize.py`` lists no n-ary sum), so the program could not be saved,
packaged or shipped. It is the same number as a chain of ``operator.add``, which serializes;
every graph of the program (the arms too) is rewritten so, in place. Reproduction without
stitch: ``experiments/repro_sym_sum_save.py``.

A tensor's element count read in a graph (``aten.sym_numel``: ``boxes.numel() == 0`` in
torchvision's batched NMS) is written as the product of its sizes. Where the tensor's sizes
are unbacked expressions (a cond arm's operand concatenated from per-level top-k: ``4*Min(1000,
u0) + ...``), torch's re-trace of the arm for AOTInductor and the ONNX exporter finds no proxy
for the count (``RuntimeError: 4*Min(1000, u0) + ... is not tracked with proxy``), while each
size read has one. Same number, so nothing changes but whether the graph lowers.
Reproduction without stitch: ``experiments/repro_nary_min.py``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable

import torch


def _value(arg):
    return arg.meta.get("val") if isinstance(arg, torch.fx.Node) else arg


def serializable_sym_ops(gm: torch.fx.GraphModule) -> int:
    """Each ``torch.sym_sum(items)`` in ``gm`` and its subgraphs replaced by
    ``items[0] + items[1] + ...``; how many were replaced."""
    return _rewrite(gm, lambda n: n.target is torch.sym_sum, _as_adds)


def numel_as_sizes(gm: torch.fx.GraphModule) -> int:
    """Each ``aten.sym_numel(t)`` in ``gm`` and its subgraphs replaced by the product of
    ``t``'s sizes (a size known to the trace is a constant); how many were replaced."""
    return _rewrite(gm, lambda n: n.target is torch.ops.aten.sym_numel.default
                    and isinstance(_value(n.args[0]), torch.Tensor), _as_product)


def _rewrite(gm: torch.fx.GraphModule, matches: Callable, rewrite: Callable) -> int:
    """``rewrite(graph, node)`` for each call node ``matches`` takes, in ``gm`` and its
    subgraphs (cond arms, loop bodies); how many there were."""
    replaced = 0
    for module in gm.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        found = [n for n in module.graph.nodes if n.op == "call_function" and matches(n)]
        for node in found:
            rewrite(module.graph, node)
        if found:
            module.recompile()
            replaced += len(found)
    return replaced


def _as_product(graph: torch.fx.Graph, node: torch.fx.Node) -> None:
    tensor = node.args[0]
    constant, product = 1, None
    with graph.inserting_before(node):
        for dim, size in enumerate(_value(tensor).shape):
            if not isinstance(size, torch.SymInt):
                constant *= size
                continue
            read = graph.call_function(torch.ops.aten.sym_size.int, (tensor, dim))
            read.meta.update(node.meta)
            read.meta["val"] = size
            product = read if product is None else _times(graph, node, product, read)
        if product is not None and constant != 1:
            product = _times(graph, node, product, constant)
    if product is None:
        _replace_with_constant(node, constant)
    else:
        if "val" in node.meta:
            product.meta["val"] = node.meta["val"]  # the count as torch.export traced it
        node.replace_all_uses_with(product)
    graph.erase_node(node)


def _times(graph: torch.fx.Graph, node: torch.fx.Node, left, right) -> torch.fx.Node:
    product = graph.call_function(operator.mul, (left, right))
    product.meta.update(node.meta)
    product.meta["val"] = _value(left) * _value(right)
    return product


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
