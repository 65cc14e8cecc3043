"""``F.scaled_dot_product_attention`` on CPU over a sequence length from data. ATen chooses
its kernel by, among others, a test that no length is 0, which torch.export cannot make on
such a length (``experiments/repro_sdpa_unbacked.py``). stitch's stand-in runs that choice
under ``torch.cond`` where every other constraint is decided without a guard
(``operators/sdpa_shim.py``): the same kernel eager runs, on every length, 0 included."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import stitch
from stitch.synthesize.operators.shims import shimmed


class Prefix(nn.Module):
    """Attention over the first ``lengths.max()`` keys, as people write it."""

    def forward(self, q, kv, lengths):
        n = int(lengths.max())
        k = kv[:, :, :n]
        return F.scaled_dot_product_attention(q, k, k)


class Masked(nn.Module):
    """The same, with a mask (boolean or additive, 2-d or 4-d) or causal."""

    def __init__(self, causal: bool = False) -> None:
        super().__init__()
        self.causal = causal

    def forward(self, q, kv, lengths, mask=None):
        n = lengths.max().item()
        torch._check(n <= kv.shape[2])
        k = kv[:, :, :n]
        if mask is not None:
            mask = mask[..., :k.shape[2]]
        return F.scaled_dot_product_attention(q, k, k, attn_mask=mask, is_causal=self.causal)


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal bits, or NaN in both everywhere (attention over no key at all)."""
    return torch.equal(a, b) or bool(torch.isnan(a).all() and torch.isnan(b).all())


Q, KV = torch.randn(2, 2, 4, 8), torch.randn(2, 2, 6, 8)
LENGTHS = ([1, 4], [6, 6], [0, 0], [3, 0])


def test_torch_export_alone_cannot_choose_the_kernel():
    with pytest.raises(Exception, match=r"Eq\(u\d+, 0\)"):
        torch.export.export(Masked(), (Q, KV, torch.tensor([3, 5])), strict=False)


@pytest.mark.parametrize("mask", [None, "bool", "additive", "bool-2d", "causal"])
def test_the_stand_in_runs_the_kernel_eager_runs_on_every_length(mask):
    torch.manual_seed(0)
    masks = {None: None, "causal": None, "bool": torch.randn(2, 1, 4, 6) > -0.5,
             "additive": torch.randn(2, 2, 4, 6), "bool-2d": torch.randn(4, 6) > -0.5}
    model, given = Masked(causal=mask == "causal"), masks[mask]
    args = (Q, KV, torch.tensor([3, 5]), given)
    with shimmed():
        program = torch.export.export(model, args, strict=False)
    assert any(n.target is torch.ops.higher_order.cond for n in program.graph.nodes)
    for lengths in LENGTHS:
        call = (Q, KV, torch.tensor(lengths), given)
        assert _same(program.module()(*call), model(*call)), lengths


def test_a_length_from_data_is_one_verified_program():
    model = Prefix()
    program = stitch.export(model, (Q, KV, torch.tensor([3, 5])),
                            examples=[((Q, KV, torch.tensor([2, 6])), {})])
    assert program.report.graphs_after == 1, str(program.report)
    for lengths in LENGTHS:
        call = (Q, KV, torch.tensor(lengths))
        assert _same(program(*call), model(*call)), lengths


def test_anything_else_is_the_original():
    """Dropout, another dtype, or a mask whose size the trace cannot relate to the keys':
    the original call, whose own test fails as before (no stand-in makes a choice it
    cannot show is ATen's)."""

    class Unrelated(nn.Module):
        def forward(self, q, kv, lengths, mask):
            n = lengths.max().item()
            torch._check(n <= kv.shape[2])
            return F.scaled_dot_product_attention(q, kv[:, :, :n], kv[:, :, :n],
                                                  attn_mask=mask[..., :n])

    with shimmed(), pytest.raises(Exception, match="data-dependent"):
        torch.export.export(Unrelated(), (Q, KV, torch.tensor([3, 5]),
                                          torch.randn(2, 2, 4, 6)), strict=False)
