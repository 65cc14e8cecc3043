"""Drop torch.export's range assertions on a bool read that check another node.

A bool read back from a tensor (``b.item()``: a cond's bool output read as Python reads
it) is an unbacked symbol ``u`` that torch 2.14 writes as ``sym_ite(b, 1, 0)``, with two
deferred runtime assertions, ``u >= 0`` and ``u <= 1``, each on its comparison node. In a
cond's arm that reads several such bools (a ``while`` on data lowered to one cond per
iteration, a flag set in its body), torch.export sometimes passes another node of the arm
to the first assertion: the message names ``ge_1``, the node asserted is ``ne`` (the
``k < 3`` test). The program then raises "Runtime assertion failed for expression
u9 >= 0" on inputs the model takes, wherever that other value is false.

Such an assertion is removed where the graph itself shows what it meant: its sibling on
the same symbol (``u <= 1``) checks ``sym_ite(b, 1, 0)``, so the symbol is a bool's 0 or 1
and the meant assertion holds on every input. An assertion whose node disagrees with its
message in any other way is left alone (the program is verified, or refused, with it).
"""

from __future__ import annotations

import re

import torch

_MESSAGE = re.compile(r"Runtime assertion failed for expression (u\d+) (>=|<=) ([01]) "
                      r"on node '(\w+)'")
ASSERT = torch.ops.aten._assert_scalar.default


def drop_misplaced_bool_asserts(gm: torch.fx.GraphModule) -> int:
    """Remove the misplaced range assertions on bool reads from ``gm`` and every subgraph;
    returns how many were removed."""
    return sum(_drop_in(module) for module in gm.modules()
               if isinstance(module, torch.fx.GraphModule))


def _drop_in(gm: torch.fx.GraphModule) -> int:
    asserts = []
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is ASSERT and len(node.args) > 1 \
                and isinstance(node.args[1], str):
            found = _MESSAGE.search(node.args[1])
            if found is not None and isinstance(node.args[0], torch.fx.Node):
                asserts.append((node, found))
    bools = {found.group(1) for node, found in asserts
             if node.args[0].name == found.group(4) and _bool_range(node.args[0])}
    misplaced = [node for node, found in asserts
                 if node.args[0].name != found.group(4) and found.group(1) in bools]
    for node in misplaced:
        gm.graph.erase_node(node)
    if misplaced:
        gm.graph.lint()
        gm.recompile()
    return len(misplaced)


def _bool_range(node: torch.fx.Node) -> bool:
    """``node`` compares ``sym_ite(b, 1, 0)`` with 0 or 1."""
    import operator

    if node.op != "call_function" or node.target not in (operator.ge, operator.le):
        return False
    ite = node.args[0]
    return (isinstance(ite, torch.fx.Node) and ite.op == "call_function"
            and ite.target is torch.sym_ite and tuple(ite.args[1:]) == (1, 0))
