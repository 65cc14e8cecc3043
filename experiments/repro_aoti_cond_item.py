"""Why Muse Glimmer's and Muse Spark's towers do not lower with AOTInductor (torch 2.14.1,
CPU), with no stitch code: a ``torch.cond`` whose arms read an int from a 0-d tensor
(``.item()``) and size their ops by it, as stitch's cond over ``if frames > 1:`` does once
the int is carried into the arms as a 0-d tensor (``rt_control._carried``'s retry).

torch.export (non-strict) gives a program that matches the model on both sides of the
test; ``aoti_compile_and_package`` then fails while lowering the arm:
``LoweringException: KeyError: 'unbacked_bindings'`` (measured 2026-11-30). stitch's
``auto`` skips the candidate and deploys the model itself for these towers
(``bench_sweep.md``).

Usage: python experiments/repro_aoti_cond_item.py   (about a minute)
"""

from __future__ import annotations

import tempfile

import torch


class FramesOffset(torch.nn.Module):
    def forward(self, grid):
        outs = []
        for f, h in grid.tolist():
            p = torch.arange(h)

            def more(p, ft, ht):
                f, h = ft.item(), ht.item()
                return ((p.unsqueeze(0) + (torch.arange(f) * h).view(f, 1)).reshape(-1),)

            def one(p, ft, ht):
                return (p.clone(),)

            pred = torch.full((), f > 1, dtype=torch.bool)
            (p,) = torch.cond(pred, more, one, (p, torch.full((), f), torch.full((), h)))
            outs.append(p)
        return torch.cat(outs)


def main() -> None:
    model, grid = FramesOffset(), torch.tensor([[2, 3], [1, 4]])
    program = torch.export.export(model, (grid,), strict=False)
    for g in ([[2, 3], [1, 4]], [[1, 5], [3, 2]]):
        g = torch.tensor(g)
        assert torch.equal(program.module()(g), model(g))
    print("torch.export: matches the model on both sides")
    from torch._inductor import aoti_compile_and_package

    try:
        aoti_compile_and_package(program, package_path=tempfile.mktemp(suffix=".pt2"))
        print("AOTInductor: built")
    except Exception as e:  # noqa: BLE001 - the finding
        print(f"AOTInductor: {type(e).__name__}: {str(e).splitlines()[0][:300]}")


if __name__ == "__main__":
    main()
