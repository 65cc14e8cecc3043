"""``F.scaled_dot_product_attention`` on CPU cannot be exported over a sequence length known
only at run time (an unbacked size) unless the length is known to be non-zero: ATen's
choice of kernel tests whether a length is 0 (the CPU flash kernel takes only non-empty
ones; the math kernel takes the rest), and torch.export (non-strict, torch 2.14.1) cannot
make that test on such a size: ``GuardOnDataDependentSymNode: Could not guard on
data-dependent expression Eq(u1, 0)``. With ``torch._check(n >= 1)`` on the length it
exports. With no stitch code involved.

While stitch traces, a stand-in runs ATen's choice under ``torch.cond`` on the zero-length
test, each side the kernel ATen calls (``stitch/synthesize/operators/sdpa_shim.py``): the
same bits as eager on every length. torch_geometric's ``GraphMultisetTransformer`` and
``SetTransformerAggregation`` (``nn.MultiheadAttention`` over the largest graph's node
count) stay refused for another reason (docs/sweep.md).

Usage: python experiments/repro_sdpa_unbacked.py   (a few seconds)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


class Attend(torch.nn.Module):
    """Attention of 4 queries over the first ``lengths.max()`` of 6 keys."""

    def __init__(self, checked: bool):
        super().__init__()
        self.checked = checked

    def forward(self, q, kv, lengths):
        n = lengths.max().item()
        if self.checked:
            torch._check(n >= 1)
        torch._check(n <= kv.shape[2])
        k = kv[:, :, :n]
        return F.scaled_dot_product_attention(q, k, k)


def main() -> None:
    q, kv, lengths = torch.randn(2, 2, 4, 8), torch.randn(2, 2, 6, 8), torch.tensor([3, 5])
    for checked in (False, True):
        model = Attend(checked).eval()
        try:
            program = torch.export.export(model, (q, kv, lengths), strict=False)
        except Exception as e:  # noqa: BLE001 - the point of the repro
            print(f"checked={checked}: {type(e).__name__}: {str(e).splitlines()[0]}")
            continue
        error = (program.module()(q, kv, lengths) - model(q, kv, lengths)).abs().max().item()
        print(f"checked={checked}: exported, max abs difference from eager {error:.1e}")


if __name__ == "__main__":
    main()
