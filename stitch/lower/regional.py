"""Regional lowering: where the whole graph does not compile, compile the pieces that pay.

Inductor lowers a stitched graph whole, or not at all: an ``.item()`` inside a cond arm
(``LoweringException: KeyError: 'unbacked_bindings'``, experiments/repro_aoti_cond_item.py)
fails the whole graph, and the deployment falls back to the graph run eagerly. Regional
lowering cuts the top-level graph at its control-flow operators (``torch.cond``,
``torch.while_loop``) with ``torch.fx.passes.split_module``::

    [straight-line ops] -> cond(pred, [arm], [arm]) -> [straight-line ops] -> while_loop(...)
         region              HOP run eagerly, arms          region              test, body
                             as pieces

The straight-line regions, the cond arms and the loop tests and bodies are the pieces; each
is compiled by Inductor and kept compiled only where, on the inputs the examples give it, it
matches itself run eagerly and is faster (``regional_choice``: tiny pieces are faster run
eagerly). The control-flow operators run as the exported graph runs them, calling whichever
form of their arms was kept. An arm (or loop test or body) that holds control flow itself is
cut the same way, and so on down: torchvision's SSD post-processing is a cond whose arm
holds a while_loop over the classes, and the arm's straight stretches, the loop's test and
its body are pieces. The
result is checked against eager on every example and timed like every other candidate
(``deploy/profile.py``).

Limits: a piece is compiled whole or not at all; the compiled pieces live in this process:
an artifact holds them built again by AOTInductor (``regional_package``,
``deploy/regional_artifact.py``).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
import torch.utils._pytree as pytree
from torch.fx.passes.split_module import split_module

from .regional_choice import PieceDecision, decide, record

CONTROL = (torch.ops.higher_order.cond, torch.ops.higher_order.while_loop)
SUBGRAPHS = {  # the subgraph arguments of each control-flow operator, by position
    torch.ops.higher_order.cond: ((1, "cond arm"), (2, "cond arm")),
    torch.ops.higher_order.while_loop: ((0, "loop test"), (1, "loop body")),
}


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


def pieces(split: torch.fx.GraphModule, control: set[str], prefix: str = ""
           ) -> dict[str, tuple[torch.nn.Module, str, str]]:
    """Every piece of ``split`` by name: (its owner, its attribute there, its kind). A cond
    arm, loop test or body that holds control flow itself is split the same way, in place
    (its control-flow operators then call its pieces), and its pieces are listed under its
    name: ``submod_1.true_graph_0.submod_0``. Deterministic: the same graph gives the same
    names (an artifact's pieces are found again by them)."""
    found: dict[str, tuple[torch.nn.Module, str, str]] = {}
    for name, sub in split.named_children():
        if name not in control:
            if isinstance(sub, torch.fx.GraphModule):
                found[prefix + name] = (split, name, "region")
            continue
        for node in sub.graph.nodes:
            subgraphs = SUBGRAPHS.get(node.target, ()) if node.op == "call_function" else ()
            for position, kind in subgraphs:
                attr = node.args[position].target
                body = getattr(sub, attr)
                if isinstance(body, torch.fx.GraphModule) and holds_control_flow(body):
                    inner, inner_control = regions(body)
                    setattr(sub, attr, inner)
                    found.update(pieces(inner, inner_control, f"{prefix}{name}.{attr}."))
                else:
                    found[f"{prefix}{name}.{attr}"] = (sub, attr, kind)
    return found


def run_examples(split: torch.fx.GraphModule, examples: Sequence) -> None:
    """Run the split graph on each example (``.args``/``.kwargs``), for the inputs its pieces
    record; an example a guarded graph refuses by design is passed over."""
    for ex in examples:
        try:
            split(*ex.args, **ex.kwargs)
        except Exception:  # noqa: BLE001 - a guarded graph refuses some examples by design
            continue


def regional(module: torch.fx.GraphModule, examples: Sequence
             ) -> tuple[torch.fx.GraphModule, tuple[PieceDecision, ...]]:
    """A module running ``module`` (``ExportedProgram.module()``) region by region, each
    piece compiled where that pays on ``examples`` (``.args``/``.kwargs``); and the decision
    for every piece. The module's buffers are as they were before."""
    split, control = regions(module)
    # the same inputs and outputs as the module: its pytree code generation, which takes
    # the call's structure and gives the outputs' back (placeholders kept in their order)
    split.graph._codegen = copy.deepcopy(module.graph._codegen)
    split.recompile()
    found = pieces(split, control)
    saved = [(v, v.detach().clone()) for v in split.buffers()]

    decisions = []
    with torch.no_grad():
        calls = record(lambda: run_examples(split, examples),
                       {n: (o, a) for n, (o, a, _) in found.items()})
        for name, (owner, attr, kind) in found.items():
            piece = getattr(owner, attr)
            decision, runs = decide(name, kind, piece, calls[name])
            setattr(owner, attr, runs)
            decisions.append(decision)
        for buffer, value in saved:
            buffer.copy_(value)  # recording, checking and timing ran the buffers' updates
    return split, tuple(decisions)
