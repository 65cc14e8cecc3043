"""torch.cond -> torch.where in a graph module, for CUDA graphs.

torch.cond reads its predicate on the host to choose a branch, which a CUDA graph cannot
capture (the capture is invalidated: seen on an H100 with torch 2.11). Where both branches are
pure, the same branch-free graph computes both and selects with ``torch.where``: no host read,
capturable, at the price of running the arm that is not taken (cheap for the small arms models
put behind data-dependent ``if``s; whether it pays is for the deployment's timing to say).

A branch is predicated only when running it on inputs the model would not give it is
harmless: no in-place writes, no checks or host reads, no random numbers (the untaken arm
would consume the generator), no indexing (an index valid only on the taken side would be a
device-side error on CUDA), no nested control flow left, and both arms give outputs of the
same shape and dtype. Anything else keeps its cond, and the reason is returned.
"""

from __future__ import annotations

import copy
import operator

import torch

UNSAFE_NAMES = ("assert", "_local_scalar_dense", "item", "nonzero", "index", "gather",
                "scatter", "embedding", "take", "masked_select", "print")


def _unsafe_op(node: torch.fx.Node) -> str | None:
    target = node.target
    if target is operator.getitem or target is where_cond:  # an inner cond predicated already
        return None
    if isinstance(target, torch._ops.HigherOrderOperator):
        return f"it holds a nested {target.__name__}"
    if not isinstance(target, torch._ops.OpOverload):
        return f"it calls {getattr(target, '__name__', target)!r}, not an ATen op"
    name = target.name()
    if target._schema.is_mutable:
        return f"{name} writes in place"
    if any(k in name for k in UNSAFE_NAMES):
        return f"{name} checks, reads on the host or indexes (unsafe on the side not taken)"
    if torch.Tag.nondeterministic_seeded in target.tags:
        return f"{name} draws random numbers"
    return None


def _why_not(arm: torch.fx.GraphModule) -> str | None:
    for node in arm.graph.nodes:
        if node.op == "call_function":
            why = _unsafe_op(node)
            if why:
                return why
        elif node.op in ("call_module", "call_method"):
            return f"it calls {node.target!r}"
    return None


def _outputs_meta(arm: torch.fx.GraphModule) -> list | None:
    out = next(n for n in arm.graph.nodes if n.op == "output")
    values = out.args[0] if isinstance(out.args[0], tuple | list) else (out.args[0],)
    metas = []
    for v in values:
        val = v.meta.get("val") if isinstance(v, torch.fx.Node) else None
        if not isinstance(val, torch.Tensor):
            return None
        metas.append((tuple(val.shape), val.dtype, val.device))
    return metas


def where_cond(predicate, true_fn, false_fn, operands):
    """What a predicated cond node runs: both arms, then an element-wise select."""
    t, f = true_fn(*operands), false_fn(*operands)
    return tuple(torch.where(predicate, a, b) for a, b in zip(t, f, strict=True))


def predicate_conds(module: torch.nn.Module) -> tuple[torch.nn.Module, int, list[str]]:
    """A copy of ``module`` (an ``ExportedProgram.module()``) whose pure conds select with
    torch.where; how many were replaced, and why each other cond was kept."""
    module = copy.deepcopy(module)
    replaced, kept = 0, []
    graphs = [m for m in module.modules() if isinstance(m, torch.fx.GraphModule)]
    for gm in reversed(graphs):  # inner subgraphs first: an outer arm may then be pure
        changed = False
        for node in gm.graph.nodes:
            if node.op != "call_function" or node.target is not torch.ops.higher_order.cond:
                continue
            _pred, true_ref, false_ref, _operands = node.args
            arms = [getattr(gm, ref.target) for ref in (true_ref, false_ref)]
            why = _why_not(arms[0]) or _why_not(arms[1])
            if why is None:
                metas = [_outputs_meta(a) for a in arms]
                if metas[0] is None or metas[0] != metas[1]:
                    why = "its branches' outputs differ in shape, dtype or device (or are unknown)"
            if why:
                kept.append(f"{node.name}: {why}")
                continue
            node.target = where_cond
            replaced += 1
            changed = True
        if changed:
            gm.recompile()
    return module, replaced, kept
