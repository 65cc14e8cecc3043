"""Inductor's CPU lowering of ``bmm`` guards on a data-dependent size while it picks a layout.

``is_preferred_layout_as_bmm_input`` (``torch/_inductor/kernel/bmm.py``) takes
``strides[-1] == 1 and (sizes[-2] == 1 or strides[-2] >= sizes[-1])`` with Python's ``bool``.
For an operand of ``u`` columns sliced out of a contiguous ``(2, 3, 16, u)`` tensor that is
``16*Max(1, u) >= u`` (true for every ``u``, which torch's ranges cannot show), and for an
operand of ``u`` rows ``Eq(u, 1)`` (either answer computes the same values: it only chooses
whether to copy the operand contiguous first). Both raise ``GuardOnDataDependentSymNode`` and
the build fails (LED's global attention). No stitch involved. stitch answers the first by the
cases of its ``Max`` and the second with the copy (``capture/lowering_guards.py``).
Run: python experiments/repro_bmm_unbacked.py   (about 10 s)
"""

import torch


class SlicedBmm(torch.nn.Module):
    def forward(self, x, n):
        u = n.item()
        t = torch.ones(2, 3, 16, u) * x[0]
        return torch.bmm(t[:, :, 0, :], torch.ones(2, u, 5))


if __name__ == "__main__":
    x, n = torch.randn(4), torch.tensor(7)
    module = torch.export.export(SlicedBmm(), (x, n)).module()
    try:
        out = torch.compile(module, fullgraph=True, dynamic=False)(x, n)
        torch.testing.assert_close(out, SlicedBmm()(x, n))
        print(f"torch {torch.__version__}: Inductor built it, same values as eager")
    except Exception as e:  # noqa: BLE001 - the failure is what this shows
        print(f"torch {torch.__version__}: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
