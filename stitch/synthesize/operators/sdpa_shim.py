"""``F.scaled_dot_product_attention`` on CPU over a sequence length known only at run time.

ATen chooses the CPU kernel by testing the inputs (``sdp_utils_cpp``'s flash constraints):
the flash kernel where every constraint holds, the math kernel otherwise. One constraint is
that neither sequence length is 0, a test torch.export cannot make on a length from data
(``Could not guard on data-dependent expression Eq(u1, 0)``,
``experiments/repro_sdpa_unbacked.py``; torch_geometric's set-attention aggregations attend
over the largest graph's node count). Where every other constraint holds for every size
(each decided by the symbols' ranges alone, no guard), ATen's choice is that test alone:
here it runs under ``torch.cond``, each side calling the kernel ATen calls, as ATen calls it
(a boolean mask first made the additive mask ATen makes of it). Exact: the same kernel on
the same inputs. Anything else (another device, dtype, dropout, grouped heads, a constraint
the ranges do not decide, the flash or math kernel turned off, or while Dynamo traces):
the original.
"""

from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.fx.experimental.symbolic_shapes import (
    free_unbacked_symbols,
    statically_known_true,
    sym_or,
)

_original = torch.nn.functional.scaled_dot_product_attention
_DTYPES = (torch.float32, torch.float64)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    if _takes_over(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa):
        lengths = (query.shape[-2], key.shape[-2])
        empty = sym_or(lengths[0] == 0, lengths[1] == 0)
        if not (statically_known_true(empty) or statically_known_true(torch.sym_not(empty))):
            return _chosen(query, key, value, attn_mask, is_causal, scale, empty)
    return _original(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p,
                     is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)


def _chosen(query, key, value, attn_mask, is_causal, scale, empty):
    def math(q, k, v, *mask):
        return torch.ops.aten._scaled_dot_product_attention_math(
            q, k, v, mask[0] if mask else None, 0.0, is_causal, scale=scale)[0]

    def flash(q, k, v, *mask):
        return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, 0.0, is_causal, attn_mask=mask[0] if mask else None, scale=scale)[0]

    mask = () if attn_mask is None else (_additive(attn_mask, query.dtype),)
    return torch.cond(empty, math, flash, (query, key, value, *mask))


def _additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """ATen's ``convert_boolean_attn_mask``: a boolean mask (True: attend) as 0 and -inf in
    the query's dtype; any other mask as it is."""
    if mask.dtype != torch.bool:
        return mask
    return torch.where(mask.logical_not(), -float("inf"),
                       torch.zeros((), dtype=dtype, device=mask.device))


def _known(condition) -> bool:
    return condition is True or (not isinstance(condition, bool)
                                 and statically_known_true(condition))


def _takes_over(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa) -> bool:
    """Whether ATen's choice on these inputs is the zero-length test alone: every other
    constraint of its CPU flash kernel holds for every size, and that test is on a length
    from data. (A mask with ``is_causal`` is ATen's error: the original raises it.)"""
    if torch.compiler.is_dynamo_compiling() or dropout_p != 0.0 or enable_gqa \
            or (is_causal and attn_mask is not None):
        return False
    if not (torch.backends.cuda.flash_sdp_enabled() and torch.backends.cuda.math_sdp_enabled()):
        return False
    qkv = (query, key, value)
    if not all(type(t) in (torch.Tensor, FakeTensor) for t in qkv):  # no subclass's own
        return False
    if not all(t.device.type == "cpu" and t.dim() == 4 and t.dtype == query.dtype
               and not t.is_nested for t in qkv) or query.dtype not in _DTYPES:
        return False
    if not any(free_unbacked_symbols(t.shape[-2]) for t in (query, key)):
        return False
    q, k, v = qkv
    same = [q.shape[0] == k.shape[0], q.shape[0] == v.shape[0],  # batch and heads
            q.shape[1] == k.shape[1], q.shape[1] == v.shape[1],
            q.shape[-1] == k.shape[-1], q.shape[-1] == v.shape[-1],  # head size
            q.stride(-1) == 1, k.stride(-1) == 1, v.stride(-1) == 1]
    if not all(_known(c) for c in same):
        return False
    return attn_mask is None or _mask_fits(attn_mask, query, key)


def _mask_fits(mask, query, key) -> bool:
    """ATen's mask constraints of the flash kernel, each decided without a guard: a 2- or
    4-d mask, boolean or of the query's dtype, needing no gradient, broadcastable to
    (batch, heads, query length, key length) along each dimension by equal size or 1, its
    last dimension's stride 1."""
    if not isinstance(mask, torch.Tensor) or mask.device.type != "cpu" or mask.requires_grad \
            or mask.dtype not in (torch.bool, query.dtype) or mask.dim() not in (2, 4):
        return False
    targets = [query.shape[0], query.shape[1], query.shape[-2], key.shape[-2]][-mask.dim():]
    return all(_known(size == target) or _known(size == 1)
               for size, target in zip(mask.shape, targets, strict=True)) \
        and _known(mask.stride(-1) == 1)
