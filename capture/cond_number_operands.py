"""torch.export names a cond arm's placeholders even where an operand became a number,
while stitch traces.

A size stitch lifts into a cond as an operand (``rt_lift``: a ``SymInt``, so that the arm's
guards on it are decided by the predicate) can be specialised later in the same trace (a
``view`` with a fixed size). The cond's node then holds the plain number (``16``) among its
operands, and torch.export's placeholder naming (``_name_hoo_subgraph_placeholders``,
torch 2.14.1) reads ``.name`` of every operand: ``AttributeError: 'int' object has no
attribute 'name'`` (PaliGemma 5.23 with its tracing probes answered as in eager: the mask
branch's continuation carries the sequence length into the arms).

The same naming gives two placeholders one name where one node is two of the cond's
operands (a size of an input each arm lifted on its own, with effects deferred from both
arms: ``SyntaxError: duplicate argument 'sym_size_int_1'`` when the arm recompiles).

While ``cond_number_operands_named()`` is active, such an operand (a number, or a node seen
earlier among the operands) is shown to the naming as the arm's own placeholder name, so
that placeholder keeps its name; the node's operands are put back as they were right
after. Nothing else changes; the patch is re-entrant and
undone when the last user leaves.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch._export import utils as export_utils

from .reentrant import Reentrant

_ORIGINAL = export_utils._name_hoo_subgraph_placeholders
_PATCH = Reentrant()


@dataclass(frozen=True)
class _Named:
    name: str


def _naming_numbers_too(gm: torch.fx.GraphModule) -> None:
    swapped: list[tuple[torch.fx.Node, tuple]] = []
    for node in gm.graph.nodes:
        if node.op != "call_function" or getattr(node.target, "_name", None) != "cond":
            continue
        operands = node._args[3]
        repeated = {i for i, o in enumerate(operands) if o in operands[:i]}
        if all(isinstance(o, torch.fx.Node) for o in operands) and not repeated:
            continue
        arm = getattr(gm, node._args[1].target)
        names = [n.name for n in arm.graph.find_nodes(op="placeholder")]
        shown = tuple(o if (isinstance(o, torch.fx.Node) and i not in repeated)
                      or i >= len(names) else _Named(names[i])
                      for i, o in enumerate(operands))
        swapped.append((node, node._args))
        node._args = (*node._args[:3], shown)
    try:
        _ORIGINAL(gm)
    finally:
        for node, args in swapped:
            node._args = args


@contextlib.contextmanager
def cond_number_operands_named() -> Iterator[None]:
    with _PATCH.active((export_utils, "_name_hoo_subgraph_placeholders",
                        _naming_numbers_too)):
        yield
