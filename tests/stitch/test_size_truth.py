"""Tests on sizes written as Python writes them, each one cond on the size (no guard), exact
on every size: the truth of a number (``if pad:``), ``not``, and ``any``/``all`` over a
generator of sizes (UNet's ``any(s % 2 != 0 for s in x.shape[-2:])``), and ``or``/``and`` of
size comparisons (each arm notes what its side says of each comparison, never the truth of
the whole: that would be a guard on the first one)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import stitch


class PadTruth(torch.nn.Module):
    def forward(self, x):
        pad = (-x.shape[1]) % 8
        if pad:
            x = F.pad(x, (0, 0, 0, pad))
        return x.reshape(x.shape[0], -1, 8, x.shape[-1]).sum(2)


class NotPad(torch.nn.Module):
    def forward(self, x):
        pad = (-x.shape[1]) % 8
        if not pad:
            return x * 2
        return F.pad(x, (0, 0, 0, pad)) + 1


class AnyOdd(torch.nn.Module):
    def forward(self, x):
        if any(s % 2 != 0 for s in x.shape[-2:]):
            x = F.pad(x, (0, x.shape[-1] % 2, 0, x.shape[-2] % 2))
        return x.mean((-1, -2))


class OrOdd(torch.nn.Module):
    def forward(self, x):
        if x.shape[-1] % 2 != 0 or x.shape[-2] % 2 != 0:
            x = F.pad(x, (0, x.shape[-1] % 2, 0, x.shape[-2] % 2))
        return x.mean((-1, -2))


class ChainedSizes(torch.nn.Module):
    def forward(self, x):
        if 2 < x.shape[-1] <= 5 and x.shape[-2] > 3:
            return x.sum(-1) * 2
        return x.mean(-1)


CASES = {
    "truth of a number": (PadTruth, (2, 13, 3), (2, 16, 3), [(2, n, 3) for n in range(1, 20)]),
    "not": (NotPad, (2, 13, 3), (2, 16, 3), [(2, n, 3) for n in range(1, 20)]),
    "any over a generator": (AnyOdd, (1, 3, 5, 6), (1, 3, 8, 8),
                             [(1, 3, h, w) for h in range(2, 7) for w in range(2, 7)]),
    "or of size comparisons": (OrOdd, (1, 3, 5, 6), (1, 3, 8, 8),
                               [(1, 3, h, w) for h in range(2, 7) for w in range(2, 7)]),
    "chained and and": (ChainedSizes, (1, 3, 5, 4), (1, 3, 2, 8),
                        [(1, 3, h, w) for h in range(2, 7) for w in range(2, 8)]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_size_test_is_one_cond_exact_on_every_size(case):
    make, first, second, sizes = CASES[case]
    model = make()
    program = stitch.export(model, (torch.randn(first),), examples=[((torch.randn(second),), {})])
    assert program.report.graph_ops.get("cond") == 1, str(program.report)
    for size in sizes:
        x = torch.randn(size)
        torch.testing.assert_close(program(x), model(x))


class CountedBySize(torch.nn.Module):
    """A loop whose count a size test gives (``range(1 + int(x.shape[0] > 3))``), its body
    appending: unrolled to the count's bound, each step past the first a cond on the size."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list = []

    def forward(self, x):
        h = x * 1.5
        for _ in range(1 + int(h.shape[0] > 3)):
            self.seen.append(h.sum())
            h = h - 0.5
        return h


def test_a_loop_counted_by_a_size_test_follows_the_size():
    model = CountedBySize()
    program = stitch.export(model, (torch.randn(4, 8),), examples=[((torch.randn(2, 8),), {})])
    assert program.report.graph_ops.get("cond") == 1, str(program.report)
    for rows in range(2, 8):
        x = torch.randn(rows, 8)
        model.seen.clear()
        want, appended = model(x), list(model.seen)
        model.seen.clear()
        torch.testing.assert_close(program(x), want)
        assert len(model.seen) == len(appended) == 1 + (rows > 3)
        torch.testing.assert_close(torch.stack(model.seen), torch.stack(appended))
