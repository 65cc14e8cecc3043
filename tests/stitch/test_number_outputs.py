"""Python numbers the model returns: the program gives them back as numbers of the kind
the graph computed (a read is a double, an int64 or a bool), never cut to the kind example
0 happened to return."""

from __future__ import annotations

import pytest
import torch

import stitch


class ClampRead(torch.nn.Module):
    def forward(self, x):
        v = x.sum().item()
        s = max(v, 0)  # Python: the int 0 where v < 0, else the float v
        return x * s, s


class ClampReadToAFloat(torch.nn.Module):
    def forward(self, x):
        v = x.sum().item()
        s = max(v, 0.0)  # one kind whatever wins
        return x * s, s


def test_a_number_whose_kind_follows_the_data_is_refused():
    """``max(v, 0)`` of a float read is the int 0 or the float ``v``, as the data says; the
    graph holds one kind. A program would give the float 0.0 where the model gives the
    int 0 on every input example 0 did not pick it for (or 6 for 6.5 where example 0 picked
    the int)."""
    x = torch.tensor([1.5, 2.0, 3.0])
    for example in (x, -x):
        with pytest.raises(stitch.StitchError, match=r"max\(\) of a float and an int"):
            stitch.export(ClampRead(), (example,))


def test_a_number_of_one_kind_comes_back_whole():
    model, x = ClampReadToAFloat(), torch.tensor([1.5, 2.0, 3.0])
    program = stitch.export(model, (x,))
    for t in (x, x * 0.1, -x):
        got, want = program(t)[1], model(t)[1]
        assert got == want and type(got) is type(want) is float, (got, want)


class DividesATensorByARead(torch.nn.Module):
    def forward(self, x):
        v = x.abs().mean().item() + 0.3
        n = int((x > 0).sum().item())
        return v / (x + 5), n / (x + 5)


def test_a_read_over_a_tensor_divides_as_python_numbers_do():
    """``v / t`` for a Python number ``v`` is ``Tensor.__rtruediv__``: ``t``'s reciprocal
    times ``v``; the program divided once and was one ulp off on most inputs."""
    torch.manual_seed(0)
    model = DividesATensorByARead()
    program = stitch.export(model, (torch.rand(4, 4) + 0.1,),
                            examples=[((-torch.rand(6, 4),), {})])
    for i in range(40):
        x = torch.randn(1 + i % 5, 4)
        for got, want in zip(program(x), model(x), strict=True):
            assert torch.equal(got, want)


class ReturnsItsMean(torch.nn.Module):
    def forward(self, x):
        return x * 2, x.mean().item()


def test_a_nan_the_model_returns_is_the_programs_nan():
    """0 rows: both give nan, which Python's ``!=`` calls a difference (a right program
    must not be refused on the 0-row cut)."""
    program = stitch.export(ReturnsItsMean(), (torch.rand(4, 4),),
                            examples=[((torch.rand(6, 4),), {})])
    got = program(torch.rand(0, 4))[1]
    assert isinstance(got, float) and got != got
