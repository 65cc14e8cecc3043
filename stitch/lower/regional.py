"""Regional lowering: where the whole graph does not compile, compile what does.

Inductor lowers a stitched graph whole, or not at all: an ``.item()`` inside a cond arm
(``LoweringException: KeyError: 'unbacked_bindings'``, experiments/repro_aoti_cond_item.py)
fails the whole graph, and the deployment falls back to the graph run eagerly. Regional
lowering cuts the top-level graph at its control-flow operators (``torch.cond``,
``torch.while_loop``) with ``torch.fx.passes.split_module``::

    [straight-line ops] -> cond -> [straight-line ops] -> while_loop -> [straight-line ops]
     compiled (Inductor)   eager    compiled (Inductor)     eager        compiled (Inductor)

Each straight-line region is ``torch.compile``\\ d on its own (``fullgraph=True``, torch's
automatic dynamic shapes: static first, symbolic after a recompile on a new size, so sizes
read from data do not recompile a region again and again), in order; the control-flow operators run as the exported
graph runs them, their arms as exported. A region Inductor cannot compile either raises
when it is built (the candidate is then reported as failed, naming the region). The result
is checked against eager and timed like every other candidate (``deploy/profile.py``).

Limits: the arms of a cond and the body of a loop are not compiled (they run as exported);
the candidate runs in process only (an artifact holds one AOTInductor package: saving a
deployment chosen so saves the whole graph's AOTInductor package where that builds, and is
refused otherwise).
"""

from __future__ import annotations

import copy

import torch
import torch.utils._pytree as pytree
from torch.fx.passes.split_module import split_module

CONTROL = (torch.ops.higher_order.cond, torch.ops.higher_order.while_loop)


def holds_control_flow(module: torch.fx.GraphModule) -> bool:
    return any(n.op == "call_function" and n.target in CONTROL for n in module.graph.nodes)


def regions(module: torch.fx.GraphModule) -> tuple[torch.fx.GraphModule, set[str]]:
    """``module`` split at its control-flow operators: the split module, and the names of
    its submodules that hold one (each in a region of its own, with the subgraphs it
    calls)."""
    part: dict[torch.fx.Node, int] = {}
    k = 0
    for node in module.graph.nodes:
        if node.op in ("placeholder", "output") or node in part:
            continue
        if node.op == "call_function" and node.target in CONTROL:
            k += 1
            part[node] = k
            for arg in pytree.tree_leaves((node.args, node.kwargs)):
                if isinstance(arg, torch.fx.Node) and arg.op == "get_attr":
                    part[arg] = k  # its arms or body, with it
            k += 1
        else:
            part[node] = k
    control = {part[n] for n in part if n.op == "call_function" and n.target in CONTROL}
    split = split_module(module, module, lambda n: part[n], keep_original_order=True)
    return split, {f"submod_{i}" for i in control}


def regional(module: torch.fx.GraphModule) -> tuple[torch.fx.GraphModule, int]:
    """A module running ``module`` (``ExportedProgram.module()``) region by region, the
    straight-line regions compiled; and how many regions were compiled."""
    split, control = regions(module)
    # the same inputs and outputs as the module: its pytree code generation, which takes
    # the call's structure and gives the outputs' back (placeholders kept in their order)
    split.graph._codegen = copy.deepcopy(module.graph._codegen)
    split.recompile()
    compiled = 0
    for name, sub in list(split.named_children()):
        if name not in control and isinstance(sub, torch.fx.GraphModule):
            setattr(split, name, torch.compile(sub, fullgraph=True))
            compiled += 1
    return split, compiled
