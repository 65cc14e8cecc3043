"""Tests over several sizes at once. Sizes a model accepts only in step (a square image's
height and width, tokens that must form a square grid): a size-test rewrite is kept where
the program it gives accepts more sizes than torch.export's (stitch/verify/size_sides.py);
dimensions of equal size at example 0 are probed together as well as one at a time, so a
rewrite that serves every square size is kept although it serves no size where one side
moves alone, and sizes are probed up to twice example 0's (a test that turns past 64). A test joined with ``or`` (``if h != s or w != s:``) is known as a test of
sizes by its parts (capture/branch_asserts.py), as a single comparison is."""

from __future__ import annotations

import torch

import stitch


def _sincos(h: int, w: int, channels: int) -> torch.Tensor:
    ys, xs = torch.meshgrid(torch.arange(h, dtype=torch.float32),
                            torch.arange(w, dtype=torch.float32), indexing="ij")
    freq = torch.arange(channels, dtype=torch.float32) + 1
    return torch.sin((ys.reshape(-1, 1) + xs.reshape(-1, 1) * 0.5) / freq)[None]


class SquareGrid(torch.nn.Module):
    """A position table made for one grid size, rebuilt for another, and the tokens folded
    back into a square grid (diffusers' PatchEmbed and DiT's unpatchify, written small)."""

    def __init__(self, side: int = 4, channels: int = 3) -> None:
        super().__init__()
        self.side = side
        self.pos = torch.nn.Parameter(_sincos(side, side, channels))

    def forward(self, x):
        h, w = x.shape[-2:]
        tokens = x.flatten(2).transpose(1, 2)
        if self.side != h or self.side != w:
            pos = _sincos(h, w, x.shape[1])
        else:
            pos = self.pos
        tokens = tokens + pos
        n = int(tokens.shape[1] ** 0.5)
        return tokens.reshape(-1, n, n, tokens.shape[-1]).permute(0, 3, 1, 2) * 2 + x


def test_a_rewrite_that_serves_square_sizes_only_is_kept_and_verified_on_them():
    model = SquareGrid()
    program = stitch.export(model, (torch.randn(1, 3, 4, 4),),
                            examples=[((torch.randn(1, 3, 6, 6),), {})])
    notes = [n for n in program.report.notes if "rewritten as torch.cond on the size" in n]
    assert notes and all("x.shape[2] and x.shape[3]: 2-3, 5-64" in n for n in notes), notes
    checks = [c.what for c in program.report.checks]
    # both sides verified on square cuts of an example: height and width cut together
    cuts = [w for w in checks if "cut to x.shape[2] and x.shape[3] ==" in w]
    assert cuts, checks
    for side in (2, 3, 5, 7, 9):
        x = torch.randn(1, 3, side, side)
        torch.testing.assert_close(program(x), model(x))


def test_a_square_cut_changes_both_dimensions_of_one_input():
    """The probe cut from example 0 sets every dimension of the group, not the last one
    of each input only (a probe of 6 x 4 would have been reported as a size refused)."""
    model = SquareGrid()
    program = stitch.export(model, (torch.randn(1, 3, 4, 4),),
                            examples=[((torch.randn(1, 3, 6, 6),), {})])
    refused = [n for n in program.report.notes if "refused by the program" in n
               and "x.shape[2] and x.shape[3]" in n]
    assert not refused, refused


class Windows(torch.nn.Module):
    """Windows of ``size`` rows: one window taken whole, other lengths padded to whole
    windows (timm's TinyViT and Swin blocks, written small). The whole-window arm only
    traces where the length is ``size``, so its test cannot become a cond; the padding
    test beside it can."""

    size = 4

    def forward(self, x):
        b, n, c = x.shape
        if n == self.size:
            x = x.reshape(b, self.size * c).reshape(b, self.size, c) * 2
        else:
            pad = (self.size - n % self.size) % self.size
            if pad > 0:
                x = torch.nn.functional.pad(x, (0, 0, 0, pad))
            x = x.reshape(b, -1, self.size, c).sum(2)
        return x + 1


def test_a_test_whose_rewrite_fails_keeps_its_guard_and_the_others_are_served():
    model = Windows()
    program = stitch.export(model, (torch.randn(2, 8, 3),),
                            examples=[((torch.randn(2, 6, 3),), {})])
    notes = program.report.notes
    assert any("its rewrite failed to export" in n and "n == self.size" in n for n in notes), \
        notes
    assert any("rewritten as torch.cond on the size" in n and "pad > 0" in n for n in notes), \
        notes
    for n in (5, 6, 7, 8, 9, 12):
        x = torch.randn(2, n, 3)
        torch.testing.assert_close(program(x), model(x))


class ResizedToGrid(torch.nn.Module):
    """An input resized to the grid the model was made for where either side differs, then
    checked to have it (timm's CrossViT, written small)."""

    size = 8

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(3 * 8 * 8, 5)

    def forward(self, x):
        h, w = x.shape[-2:]
        if h != self.size or w != self.size:
            x = torch.nn.functional.interpolate(x, size=(self.size, self.size),
                                                mode="bilinear", align_corners=False)
        b, c, h, w = x.shape
        assert h == self.size and w == self.size, f"Input size ({h}*{w}) doesn't match"
        return self.proj(x.flatten(1))


def test_a_test_joined_with_or_on_sizes_is_a_cond_served_on_every_size():
    model = ResizedToGrid()
    program = stitch.export(model, (torch.randn(2, 3, 8, 8),),
                            examples=[((torch.randn(2, 3, 12, 12),), {})])
    assert program.report.graphs_after == 1
    for h, w in ((5, 5), (8, 8), (9, 9), (16, 16), (8, 11), (6, 8)):
        x = torch.randn(2, 3, h, w)
        torch.testing.assert_close(program(x), model(x))


class CoarseGrid(torch.nn.Module):
    """A test on a 32-pixel stride that turns only past 64 pixels (RT-DETR's three strides,
    written small): the sizes its rewrite adds lie above the first 64 probed."""

    def forward(self, x):
        if (x.shape[-1] - 1) // 32 == 2:
            return x.flip(-1) * 2
        return x - 1


def test_a_rewrite_whose_sizes_lie_past_64_is_kept():
    model = CoarseGrid()
    program = stitch.export(model, (torch.randn(2, 64),), examples=[((torch.randn(2, 96),), {})])
    notes = [n for n in program.report.notes if "rewritten as torch.cond on the size" in n]
    assert len(notes) == 1 and "65-96" in notes[0] and "of 2-128 tried" in notes[0], notes
    for n in (8, 64, 65, 80, 96, 97, 200):
        x = torch.randn(2, n)
        torch.testing.assert_close(program(x), model(x))
