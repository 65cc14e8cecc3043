"""Scalar tensor constants inside cond/while_loop branches become ``aten.full`` ops.

``x[idx] = -1e4`` inside a ``torch.cond`` branch traces to a 0-d tensor constant read by
``get_attr`` and copied by ``lift_fresh_copy`` — in the branch's subgraph. torch.export
lifts constants out of the top graph only, so the subgraph keeps a ``get_attr`` of a tensor:
``torch.export.save`` then refuses the program ("getattr nodes containing tensors should not
appear in the graph") and AOTInductor fails ("Attempting to use FunctionalTensor on its
own"). Longformer's global-attention branch has three such constants.

    _tensor_constant0 = self._tensor_constant0          full = aten.full.default(
    lift = aten.lift_fresh_copy(_tensor_constant0) ->       [], -3.4e38, dtype=f32, device=cpu)
    aten.index_put_(t, idx, lift)                       aten.index_put_(t, idx, full)

Only 0-d constants are rewritten (their value is one number: ``full`` makes the same fresh
tensor, same dtype and device); a larger constant in a branch is left, and lowering or
saving reports torch's error.
"""

from __future__ import annotations

import torch

_COPIES = (torch.ops.aten.lift_fresh_copy.default, torch.ops.aten.lift_fresh.default)


def inline_branch_constants(gm: torch.fx.GraphModule) -> int:
    """Rewrite 0-d tensor constants in every subgraph of ``gm`` (not ``gm``'s own graph,
    whose constants torch.export lifts). Returns how many were rewritten."""
    return sum(_inline_in(module) for module in gm.modules()
               if isinstance(module, torch.fx.GraphModule) and module is not gm)


def _inline_in(gm: torch.fx.GraphModule) -> int:
    graph = gm.graph
    done = 0
    for node in list(graph.nodes):
        value = getattr(gm, node.target, None) if node.op == "get_attr" else None
        if not isinstance(value, torch.Tensor) or value.dim() != 0 or value.requires_grad:
            continue
        with graph.inserting_before(node):
            full = graph.call_function(torch.ops.aten.full.default, ([], value.item()),
                                       {"dtype": value.dtype, "device": value.device,
                                        "pin_memory": False})
        full.meta.update({k: v for k, v in node.meta.items() if k in ("val", "stack_trace")})
        for user in list(node.users):
            if user.op == "call_function" and user.target in _COPIES:
                user.replace_all_uses_with(full)
                graph.erase_node(user)
        node.replace_all_uses_with(full)
        graph.erase_node(node)
        delattr(gm, node.target)
        done += 1
    if done:
        graph.lint()
        gm.recompile()
    return done
