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



class CountedBySizeInABranch(torch.nn.Module):
    """The same loop inside a branch on data: torch.cond's trace of the arm (Dynamo) must
    keep the count symbolic and unroll it to its bound too, and the guard a first rewrite
    made there must name the loop's line, not the enclosing ``if``'s, for the loop to become
    a size test."""

    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def forward(self, x):
        h = x * 1.5
        if h[:, -1].max() > -5.0:
            for _ in range(1 + int(h.shape[0] > 3)):
                self.n += 1
                h = h - 0.5
        else:
            h = -h
        return h


class CountedByAModuloInABranch(CountedBySizeInABranch):
    def forward(self, x):
        h = x * 1.5
        if h[:, -1].max() > -5.0:
            for _ in range(1 + h.shape[1] % 4):
                self.n += 1
                h = h - 0.5
        else:
            h = -h
        return h


class CountedByAnySizeInABranch(CountedBySizeInABranch):
    """``any`` over the sizes (Dynamo's trace of the arm: its SymBools pass as bools), and a
    name bound to None before the branch that the loop sets."""

    def forward(self, x):
        h = x * 1.5
        extra = None
        if h[:, -1].max() > -5.0:
            for _ in range(1 + int(any(s % 4 != 0 for s in h.shape))):
                self.n += 1
                extra = h.mean(0)
                h = h - 0.5
        else:
            h = -h
        return h if extra is None else h + extra


COUNTS = {  # the model, its count, the examples' shapes, the shapes served
    "int of a size test": (CountedBySizeInABranch, lambda x: 1 + int(x.shape[0] > 3),
                           [(4, 8), (2, 8), (5, 8)], [(rows, 8) for rows in range(2, 8)]),
    "a size modulo": (CountedByAModuloInABranch, lambda x: 1 + x.shape[1] % 4,
                      [(3, 8), (3, 6), (4, 9)], [(3, cols) for cols in range(2, 12)]),
    "any over the sizes": (CountedByAnySizeInABranch,
                           lambda x: 1 + int(any(s % 4 != 0 for s in x.shape)),
                           [(4, 8), (6, 8), (5, 8), (4, 12)],
                           [(4, 8), (6, 8), (5, 8), (4, 12), (3, 6), (8, 4), (7, 7)]),
}


@pytest.mark.parametrize("count", sorted(COUNTS))
def test_a_loop_counted_by_sizes_in_a_data_branch_follows_the_sizes(count):
    make, spell, shapes, served = COUNTS[count]
    model = make()
    program = stitch.export(model, (torch.randn(shapes[0]),),
                            examples=[((torch.randn(s),), {}) for s in shapes[1:]])
    for shape in served:
        for sign in (1.0, -1.0):  # -1: every value below -5 after scaling, the other side
            x = sign * (torch.rand(shape) + 4.0)
            model.n = 0
            want, counted = model(x), model.n
            model.n = 0
            torch.testing.assert_close(program(x), want)
            assert model.n == counted == (spell(x) if sign > 0 else 0)


def _grid_embedding(h, w, d):
    """A (1, h*w, d) table computed from the grid's size (DiT's 2-D sin-cos embedding)."""
    gy, gx = torch.meshgrid(torch.arange(h, dtype=torch.float32),
                            torch.arange(w, dtype=torch.float32), indexing="ij")
    f = torch.arange(d // 4, dtype=torch.float32)
    a, b = gy.reshape(-1, 1) * f, gx.reshape(-1, 1) * f
    return torch.cat([a.sin(), a.cos(), b.sin(), b.cos()], 1).unsqueeze(0)


class StoredOrComputed(torch.nn.Module):
    """diffusers' PatchEmbed: the stored table where the grid is the one it was made for,
    one computed from the grid otherwise; the two sides give tables of other sizes."""

    def __init__(self) -> None:
        super().__init__()
        self.height = self.width = 4
        self.proj = torch.nn.Conv2d(4, 8, 2, 2)
        self.register_buffer("pos_embed", _grid_embedding(4, 4, 8))

    def forward(self, x):
        h, w = x.shape[-2] // 2, x.shape[-1] // 2
        y = self.proj(x).flatten(2).transpose(1, 2)
        if self.height != h or self.width != w:
            pe = _grid_embedding(h, w, 8)
        else:
            pe = self.pos_embed
        return y + pe


def test_a_size_test_whose_sides_give_other_sizes_is_kept_when_torchs_guards_read_it():
    """The widened program's guards are Python torch writes with ``torch.sym_max`` and
    ``math.trunc``: read with those in scope, the cond is kept and every grid is served."""
    torch.manual_seed(0)
    model = StoredOrComputed().eval()
    examples = [((torch.randn(2, 4, 8, 8),), {}), ((torch.randn(1, 4, 12, 12),), {})]
    program = stitch.export(model, (torch.randn(1, 4, 8, 8),), examples=examples)
    assert program.report.graph_ops.get("cond") == 1, str(program.report)
    with torch.no_grad():
        for shape in ((1, 4, 8, 8), (3, 4, 12, 12), (2, 4, 16, 10), (1, 4, 6, 8)):
            x = torch.randn(shape)
            torch.testing.assert_close(program(x), model(x))


class RankBySize(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] > 3:
            return x.sum(0)
        return x * 2


def test_a_size_test_whose_sides_give_other_ranks_is_carried_to_the_output():
    """The two sides give other ranks: the cond on the size carries both sides and a flag
    (rt_union.py), and the program returns each side's rank, as the model does."""
    program = stitch.export(RankBySize(), (torch.randn(4, 3),),
                            examples=[((torch.randn(2, 3),), {})])
    assert program.report.graph_ops.get("cond") == 1, str(program.report)
    with torch.no_grad():
        for rows in (1, 2, 3, 4, 5, 7):
            x = torch.randn(rows, 3)
            torch.testing.assert_close(program(x), RankBySize()(x))


class Unpatchify(torch.nn.Module):
    """DiT's unpatchify: the grid side read off the token count, ``int(n ** 0.5)``."""

    def __init__(self) -> None:
        super().__init__()
        self.out = torch.nn.Linear(8, 16)

    def forward(self, tokens):
        t = self.out(tokens)
        height = width = int(t.shape[1] ** 0.5)
        t = t.reshape(-1, height, width, 2, 2, 4)
        t = torch.einsum("nhwpqc->nchpwq", t)
        return t.reshape(-1, 4, height * 2, width * 2)


def test_int_of_a_size_read_as_a_float_stays_symbolic():
    """``int()`` of a float a dynamic size gives fixed it as a constant (a guard at that
    line); the line is a size-test site and ``int`` of the symbolic float is
    ``torch.sym_int``: every grid is served."""
    torch.manual_seed(0)
    model = Unpatchify().eval()
    program = stitch.export(model, (torch.randn(1, 16, 8),),
                            examples=[((torch.randn(2, 36, 8),), {})])
    with torch.no_grad():
        for batch, side in ((1, 4), (2, 6), (3, 8), (1, 3)):
            x = torch.randn(batch, side * side, 8)
            torch.testing.assert_close(program(x), model(x))


class ChosenBySize(torch.nn.Module):
    def forward(self, x):
        n = 0
        n = n + 1 if x.shape[1] % 8 else n - 2
        return x + n, n


def test_a_conditional_expression_on_a_size_is_a_cond_on_the_size():
    """``n = a if x.shape[1] % 8 else b``: an ``if`` statement first, then a select on the
    size (both sides cheap and pure), its number an output of the graph."""
    model = ChosenBySize()
    program = stitch.export(model, (torch.randn(2, 8),), examples=[((torch.randn(2, 6),), {})])
    assert program.report.graph_ops.get("where") == 1, str(program.report)
    for cols in range(2, 20):
        x = torch.randn(2, cols)
        got, want = program(x), model(x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1]
