"""Loops on data carrying what a ``torch.while_loop`` or a cond cannot as written, each one
verified graph, exact: a float and an int counter carried by a ``while`` on a tensor, a
``None`` that the loop's first iteration (which always runs) replaces, a counter attribute
and a dict rebuilt in a loop counted by ``int(t.any())``, a None or a float carried by a
loop counted by data with no calls in it, a loop inside a data branch that leaves itself
early (its ``break`` stays in the arm), and a number read from data appended to a module
global in a branch that raises."""

from __future__ import annotations

import pytest
import torch

import stitch

HISTORY: list = []


class FloatCarried(torch.nn.Module):
    def forward(self, x):
        h, s, k = x * 1.5, 1.0, 0
        while bool(h.max() > 1.0) and k < 3:
            s = s * 0.5
            h = h - 1.0
            k += 1
        return h * s, s


class OptionalReplaced(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list = []

    def forward(self, x):
        h, extra = x * 1.5, None
        for _ in range(1 + int(0 < h.mean().item() < 1)):
            self.seen.append(h.sum())
            extra = h.mean(0)
            h = h - 0.5
        return h if extra is None else h + extra


class CountedByAny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def forward(self, x):
        h = x * 1.5
        d = {"a": h, "b": h.sum()}
        for _ in range(1 + int((h > 2.0).any())):
            self.n += 1
            d = {"a": h * 2.0, "b": h.sum()}
            h = h - 0.5
        return d["a"] + d["b"]


class RaiseAfterAppend(torch.nn.Module):
    def forward(self, x):
        if not x.mean() > 0:
            HISTORY.append(x.min().item())
            raise ValueError("input rejected")
        return x + 1


class LoopInBranch(torch.nn.Module):
    def forward(self, x):
        h = x * 1.5
        if h.mean() > 1.0:
            for j in range(3):
                h = h * 0.9
                if j == 1:
                    h = h * 2.0
                    break
                h = h - 1.0
        else:
            h = -h
        return h


class OptionalNoEffects(torch.nn.Module):
    """``None`` carried by a loop counted by data with a static bound and no calls in it: a
    while_loop cannot carry None; each iteration's cond can."""

    def forward(self, h):
        extra = None
        for _ in range(1 + int(torch.isnan(h).any())):
            extra = h.mean(0)
            h = h - 0.5
        return h if extra is None else h + extra


class FloatNoEffects(torch.nn.Module):
    """A float carried by the same loop and returned: a while_loop would read it back from
    a tensor (a scalar read the census breaks on); each iteration's cond keeps it a number."""

    def forward(self, h):
        s = 1.0
        for _ in range(1 + int(torch.isnan(h).any())):
            s = s * 0.5
            h = h - 0.5
        return h * s, s


class OptionalAnnotated(torch.nn.Module):
    """The same, ``None`` bound with an annotation."""

    def forward(self, h):
        extra: torch.Tensor | None = None
        for _ in range(1 + int(torch.isnan(h).any())):
            extra = h.mean(0)
            h = h - 0.5
        return h if extra is None else h + extra


class FloatInATuple(torch.nn.Module):
    """The same float, bound with another name by one tuple assignment."""

    def forward(self, x):
        h, s = x * 1.0, 1.0
        for _ in range(1 + int(torch.isnan(h).any())):
            s = s * 0.5
            h = h - 0.5
        return h * s, s


def _inputs(make):
    """One input per side of the model's test (the loops' counts, the raise)."""
    low, high = torch.full((2, 4), 0.1), torch.full((2, 4), 3.0)
    if make is OptionalReplaced:
        return [torch.full((2, 4), 0.4), torch.full((2, 4), 2.0)]
    if make in (OptionalNoEffects, FloatNoEffects, OptionalAnnotated, FloatInATuple):  # a NaN in column 0: two iterations
        return [low, torch.cat([torch.full((2, 1), float("nan")), high[:, 1:]], 1)]
    return [low, high]


@pytest.mark.parametrize("make", [FloatCarried, OptionalReplaced, CountedByAny,
                                  LoopInBranch, OptionalNoEffects, FloatNoEffects,
                                  OptionalAnnotated, FloatInATuple])
def test_a_loop_carrying_what_no_while_loop_takes_is_one_exact_graph(make):
    model = make()
    first, second = _inputs(make)
    program = stitch.export(model, (first,), examples=[((second,), {})])
    for x in (first, second, first * 0.5, second + 1.0):
        counts = _state(model)
        want = model(x)
        after_model = _state(model)
        got = program(x)
        torch.testing.assert_close(got, want, equal_nan=True)
        assert program.report.graph_ops.get("cond", 0) + program.report.graph_ops.get(
            "while_loop", 0) >= 1, str(program.report)
        # the program's epilogue changes the state as much as the model did
        assert [b - a for a, b in zip(after_model, _state(model), strict=True)] == \
            [b - a for a, b in zip(counts, after_model, strict=True)]


def _state(model) -> list[int]:
    return [getattr(model, "n", 0), len(getattr(model, "seen", ()))]


def test_a_number_read_in_a_raising_branch_is_appended_as_the_model_appends_it():
    """Verification forces the branch no example took; the model run forced appends the
    Python float the model appends (not the tensor the rewrite reads it into). With the
    checks in the epilogue, the program appends it before it raises, as the model does."""
    HISTORY.clear()
    model = RaiseAfterAppend()
    program = stitch.export(model, (torch.rand(2, 4) + 0.1,),
                            examples=[((torch.rand(3, 4) + 0.2,), {})],
                            settings=stitch.Settings(checks="epilogue"))
    HISTORY.clear()
    x = -torch.rand(2, 4) - 0.1
    with pytest.raises(ValueError, match="input rejected"):
        program(x)
    assert len(HISTORY) == 1 and isinstance(HISTORY[0], float)
    assert HISTORY[0] == pytest.approx(x.min().item())
