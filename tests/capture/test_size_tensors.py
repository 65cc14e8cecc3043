"""A tensor computed from sizes alone and read back as a number is that size while stitch
traces (capture/size_tensors.py): Longformer's ``torch.div(seq_len, w, rounding_mode=
"trunc")``, read once for the query and once for the key, gave two unbacked symbols that
torch.export could not show equal, and the export failed on the first broadcast."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.export import Dim

import stitch
from capture.size_tensors import RULES, sizes_through_tensors


def _chunk(x: torch.Tensor, w: int) -> torch.Tensor:
    """Longformer's spelling: chunks of 2w overlapping by w, their count a tensor made from
    a size."""
    x = x.view(x.size(0), torch.div(x.size(1), 2 * w, rounding_mode="trunc"), 2 * w,
               x.size(2))
    size, stride = list(x.size()), list(x.stride())
    size[1], stride[1] = size[1] * 2 - 1, stride[1] // 2
    return x.as_strided(size=size, stride=stride)


class ChunkedScores(nn.Module):
    """Sliding-window scores as Longformer computes them, here with one head of one feature
    (its attention-mask pass): torch.export alone cannot show the two counts agree."""

    def __init__(self, w: int = 4) -> None:
        super().__init__()
        self.w = w
        self.q = nn.Linear(1, 1)
        self.k = nn.Linear(1, 1)

    def forward(self, x):
        b, s, _ = x.shape
        q = self.q(x).view(b, s, 1, 1).transpose(1, 2).reshape(b, s, 1)  # heads first
        k = self.k(x).view(b, s, 1, 1).transpose(1, 2).reshape(b, s, 1)
        chunks = torch.div(s, self.w, rounding_mode="trunc") - 1  # 2n - 1 chunks of 2w
        scores = torch.einsum("bcxd,bcyd->bcxy", (_chunk(q, self.w), _chunk(k, self.w)))
        out = scores.new_zeros((b, chunks, 2 * self.w, 2 * self.w))
        return out + scores


def _export(model: nn.Module, x: torch.Tensor, rule: bool):
    with sizes_through_tensors() if rule else torch.no_grad():
        return torch.export.export(model, (x,), dynamic_shapes=({1: Dim.AUTO},), strict=False)


def _reads(ep) -> int:
    return sum(n.target is torch.ops.aten.item.default and len(n.users) > 0
               for n in ep.graph.nodes)


def test_two_reads_of_one_size_tensor_are_the_same_size():
    model, x = ChunkedScores().eval(), torch.randn(2, 16, 1)
    try:  # torch.export alone: two unbacked counts meet in the einsum
        _export(model, x, rule=False)
        plain = "exported"
    except Exception as e:  # noqa: BLE001 - which error is torch's business
        plain = type(e).__name__
    assert plain != "exported"  # what the rule is for; if torch learns it, drop this line
    ep = _export(model, x, rule=True)
    assert _reads(ep) == 0  # every read is size arithmetic on the input's length
    y = torch.randn(2, 24, 1)
    torch.testing.assert_close(ep.module()(y), model(y))


def test_stitch_serves_every_length_without_a_guard():
    model = ChunkedScores().eval()
    program = stitch.export(model, (torch.randn(2, 16, 1),),
                            examples=[((torch.randn(2, 24, 1),), {})])
    for n in (16, 32, 40):  # two chunks or more: see the guard on one below
        y = torch.randn(2, n, 1)
        torch.testing.assert_close(program(y), model(y))


def _spelled_count(x: torch.Tensor, how: str) -> torch.Tensor:
    """The chunk count of x's length, each way a model may write it."""
    n = x.shape[1]
    if how == "tensor":
        return torch.tensor(n) // 4
    if how == "full":
        return torch.full((), n, dtype=torch.long).div(4, rounding_mode="floor")
    if how == "floor_divide":
        return torch.floor_divide(torch.as_tensor(n - 0) * 1, 4)  # as_tensor of a SymInt
    if how == "clamped":
        return torch.clamp(torch.div(n, 4, rounding_mode="floor"), min=1, max=1 << 20)
    if how == "maximum":
        return torch.maximum(torch.tensor(n) // 4, torch.tensor(1))
    raise AssertionError(how)


class CountsInALoop(nn.Module):
    """Two layers, each counting in a helper, reading the count back as a size."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.how = how
        self.layers = nn.ModuleList(nn.Linear(3, 3) for _ in range(2))

    def forward(self, x):
        for layer in self.layers:
            c = _spelled_count(x, self.how)
            x = layer(x).view(x.shape[0], c, 4, 3).flip(2).reshape(x.shape)
        return x


@pytest.mark.parametrize("how", ["tensor", "full", "clamped", "maximum"])
def test_every_spelling_of_a_count_reads_back_as_the_size(how):
    model, x = CountsInALoop(how).eval(), torch.randn(2, 16, 3)
    ep = _export(model, x, rule=True)
    assert _reads(ep) == 0, how
    y = torch.randn(2, 28, 3)
    torch.testing.assert_close(ep.module()(y), model(y))


def test_as_tensor_of_a_size_is_specialised_by_torch_as_documented():
    model, x = CountsInALoop("floor_divide").eval(), torch.randn(2, 16, 3)
    ep = _export(model, x, rule=True)  # exports, fixed to the traced length
    with pytest.raises(AssertionError, match="Guard failed"):
        ep.module()(torch.randn(2, 28, 3))


class Reads(nn.Module):
    """Reads the rule must leave to torch (unbacked): a truncation that is not a floor for
    every input, a count changed in place after it was made."""

    def forward(self, x):
        n = x.size(1)
        back = torch.div(-n, 3, rounding_mode="trunc")  # trunc of a negative: not a floor
        moved = torch.div(n, 2, rounding_mode="floor")
        moved.add_(1)  # changed in place: the memo is torch's to drop
        return x[:, :moved], back + 0


def test_reads_that_are_not_exact_stay_data():
    model, x = Reads().eval(), torch.randn(2, 10, 3)
    ep = _export(model, x, rule=True)
    assert _reads(ep) >= 1  # the slice bound after the in-place change is still read
    y = torch.randn(2, 7, 3)
    for got, want in zip(ep.module()(y), model(y), strict=True):
        torch.testing.assert_close(got, want, equal_nan=True)


def test_no_rule_divides_by_zero_or_truncates_a_negative():
    assert RULES[torch.div](7, 0, rounding_mode="floor") is None
    assert RULES[torch.remainder](7, 0) is None
    assert RULES[torch.div](-7, 2, rounding_mode="trunc") is None
    assert RULES[torch.div](-7, 2, rounding_mode="floor") == -4
    assert RULES[torch.div](7, 2) is None  # a float


def test_a_number_outside_export_is_untouched():
    with sizes_through_tensors():
        t = torch.div(9, 2, rounding_mode="floor") + 1
    assert t.item() == 5 and type(t) is torch.Tensor
