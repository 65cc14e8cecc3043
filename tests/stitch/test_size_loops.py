"""Tests on sizes inside loops and checks, each followed on every size (no guard): a
``break`` on a size test (the loop's flag is the size's truth as a tensor), a loop counted by
``int(a or b)`` of size tests or by ``int()`` of a size's remainder, a ``while`` on a size
and a counter, and ``if <sizes>: raise`` whose message formats a size."""

from __future__ import annotations

import warnings

import pytest
import torch

import stitch


class BreakOnSize(torch.nn.Module):
    def forward(self, x):
        h, s = x * 1.5, 1.0
        for _ in range(3):
            h = h * 0.9
            if h.shape[0] > 3:
                s = s * 0.5
                break
            s = s + 0.25
        return h * s


class WarnAndBreakOnSize(torch.nn.Module):
    """The breaking arm warns with a value read from data: the warning is replayed after the
    graph, only where the size takes that side."""

    def forward(self, x):
        h, s = x * 1.5, 1.0
        for _ in range(3):
            h = h * 0.9
            if h.shape[1] % 8:
                warnings.warn(f"odd width max={h.max().item():.1f}", stacklevel=1)
                s = s * 0.5
                break
            s = s + 0.25
        return h * s


class BreakOnAnySize(torch.nn.Module):
    """``any`` over a generator of sizes as the breaking test; the generator's variable is
    not a name the loop binds."""

    def forward(self, x):
        h, n = x * 1.5, 0
        for _ in range(3):
            h = h * 0.9
            if any(s % 4 != 0 for s in h.shape):
                n = n + 1
                break
            n = n - 2
        return h + n


class CountedByOr(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list = []

    def forward(self, x):
        h = x * 1.5
        for _ in range(1 + int(h.shape[0] > 3 or h.shape[1] % 8 != 0)):
            self.seen.append(h.sum())
            h = h - 0.5
        return h


class CountedByRemainder(torch.nn.Module):
    def forward(self, x):
        h, n = x * 1.5, 0
        for _ in range(1 + int(h.shape[1] % 4)):
            n = n + 1
            h = h - 0.5
        return h + n


class WhileOnSize(torch.nn.Module):
    def forward(self, x):
        h = x * 1.5
        k = 0
        while h.shape[0] > 3 and k < 3:
            h = h - 1.0
            k += 1
        return h * (k + 1)


class RaiseOnSizes(torch.nn.Module):
    def forward(self, x):
        h = x * 1.5
        if h[:, -1].max() > -5.0:
            if any(s % 4 != 0 for s in h.shape):
                raise ValueError(f"input rejected: {h.shape[0]} rows")
            h = h * 2.0
        return h


CASES = {
    "break on a size test": (BreakOnSize, (4, 8), (2, 8), [(r, 8) for r in range(2, 9)]),
    "break with a warning": (WarnAndBreakOnSize, (2, 8), (2, 7), [(2, c) for c in range(2, 18)]),
    "break on any over sizes": (BreakOnAnySize, (4, 8), (3, 8),
                                [(r, 8) for r in range(2, 13)]),
    "a count of int(a or b)": (CountedByOr, (2, 8), (4, 6),
                               [(r, c) for r in range(2, 7) for c in (6, 8)]),
    "a count of int(size % 4)": (CountedByRemainder, (2, 8), (2, 7), [(2, c) for c in range(2, 14)]),
    "while on a size and a counter": (WhileOnSize, (4, 8), (2, 8), [(r, 8) for r in range(2, 9)]),
}


# one case in `make test`, the others in `make test-all` (each export takes half a minute)
@pytest.mark.parametrize("case", [
    c if c == "break on a size test" else pytest.param(c, marks=pytest.mark.slow)
    for c in sorted(CASES)])
def test_a_size_test_in_a_loop_follows_the_size(case):
    make, first, second, sizes = CASES[case]
    torch.manual_seed(0)
    model = make()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = stitch.export(model, (torch.randn(first),),
                                examples=[((torch.randn(second),), {})])
        for size in sizes:
            x = torch.randn(size)
            seen = getattr(model, "seen", None)
            if seen is not None:
                seen.clear()
            want = model(x)
            appended = list(seen or ())
            if seen is not None:
                seen.clear()
            torch.testing.assert_close(program(x), want)
            if seen is not None:
                assert len(seen) == len(appended)
                torch.testing.assert_close(torch.stack(seen), torch.stack(appended))


def test_a_warning_in_a_size_broken_loop_is_replayed_only_where_the_size_takes_it():
    model = WarnAndBreakOnSize()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = stitch.export(model, (torch.randn(2, 8),), examples=[((torch.randn(2, 7),), {})])
    for cols, warned in ((8, 0), (16, 0), (7, 1), (9, 1)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            program(torch.randn(2, cols))
        assert len([w for w in caught if "odd width" in str(w.message)]) == warned


def test_a_raise_on_sizes_in_a_data_branch_raises_where_the_model_raises():
    """The check is on the sizes' truth as a tensor, inside the data branch's cond: sizes
    the model accepts are served, and the model's ValueError is raised where it raises (its
    message names the expression: a graph's check carries one fixed text)."""
    torch.manual_seed(0)
    model = RaiseOnSizes()
    program = stitch.export(model, (torch.randn(4, 8),), examples=[((torch.randn(8, 4),), {})])
    for rows, cols in ((4, 8), (8, 12), (12, 4)):
        x = torch.randn(rows, cols)
        torch.testing.assert_close(program(x), model(x))
    x = torch.randn(6, 8)
    with pytest.raises(ValueError):
        model(x)
    with pytest.raises(ValueError, match="input rejected"):
        program(x)
    x = -torch.rand(6, 8) - 6.0  # the data branch not taken: no check
    torch.testing.assert_close(program(x), model(x))


class CountsOddWidths(torch.nn.Module):
    """A counter added on one side of a size test only: the first program, traced on the
    side that leaves it as it was, replays nothing; the size's cond replays it where the
    size takes the adding side."""

    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def forward(self, x):
        if x.shape[1] % 8:
            self.n += 1
            return x + 1.0
        return x * 2.0


def test_a_counter_on_one_side_of_a_size_test_is_replayed_where_the_size_takes_it():
    model = CountsOddWidths()
    program = stitch.export(model, (torch.randn(2, 8),), examples=[((torch.randn(2, 7),), {})])
    for cols in (8, 7, 16, 9):
        x = torch.randn(2, cols)
        before = model.n
        want = model(x)
        added = model.n - before
        torch.testing.assert_close(program(x), want)
        assert model.n - before == 2 * added
