"""A scalar read (``t.item()``, ``float(t)``) stays a 0-d tensor in the graph, and Python
arithmetic on it rounds as Python's does: in double precision, as the float it was."""

from __future__ import annotations

import torch

import stitch


class Bucket(torch.nn.Module):
    def forward(self, x):
        total = x.sum().item()
        bucket = int(total * 10)  # 22.999999523... * 10 in double: 22
        return x + bucket


class Threshold(torch.nn.Module):
    def forward(self, x):
        total = x.sum().item()
        if total * 10 >= 23:
            return x + 1
        return x - 1


def _at_the_edge() -> torch.Tensor:
    x = torch.zeros(4, 8)
    x[0, 0] = 2.3  # float32(2.3) = 2.2999999523...
    return x


def test_arithmetic_on_a_read_rounds_in_double():
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    model = Bucket()
    program = stitch.export(model, (x,), examples=[((x * 3,), {})])
    torch.testing.assert_close(program(_at_the_edge()), model(_at_the_edge()))


def test_a_branch_on_arithmetic_on_a_read_takes_eagers_side():
    torch.manual_seed(6)
    x = torch.randn(4, 8)
    model = Threshold()
    program = stitch.export(model, (x,), examples=[((-x.abs() - 0.1,), {})])
    torch.testing.assert_close(program(_at_the_edge()), model(_at_the_edge()))


class NarrowRead(torch.nn.Module):
    def forward(self, x, a):
        return x + (a.item() + 250)


def test_a_read_of_a_narrow_integer_does_not_wrap():
    """A Python int never wraps: a uint8/int8/int32 read is int64 in the graph, so
    ``a.item() + 250`` with a uint8 200 is 450 (it was 194) and int32 reads past 2**31."""
    model = NarrowRead()
    for dtype, value in [(torch.uint8, 200), (torch.int8, 100), (torch.int32, 2**31 - 100)]:
        def inputs(v, dtype=dtype):
            return torch.zeros(2, dtype=torch.float64), torch.tensor(v, dtype=dtype)

        program = stitch.export(model, inputs(3), examples=[(inputs(4), {})])
        torch.testing.assert_close(program(*inputs(value)), model(*inputs(value)))


class IntOfAFlag(torch.nn.Module):
    def forward(self, x):
        a = int((x > 100).any())
        return x + (a + a)


def test_int_of_a_bool_read_adds_as_a_number():
    """``int(flag)`` is 0 or 1 in Python: kept a bool tensor, ``a + a`` was a logical or
    (1 where the model gives 2), and examples that read False could not tell."""
    model = IntOfAFlag()
    program = stitch.export(model, (torch.tensor([1.0, 2.0]),),
                            examples=[((torch.tensor([-1.0, 2.0]),), {})])
    for x in (torch.tensor([101.0, 2.0]), torch.tensor([1.0, 2.0])):
        torch.testing.assert_close(program(x), model(x))


class Extremes(torch.nn.Module):
    def forward(self, x, a, b):
        lo = min(a.item(), b.item())
        hi = max(a.item(), b.item())
        print("lo", lo, "hi", hi)
        return x * lo + hi


def test_min_and_max_of_reads_pick_as_python_does():
    """Python's min/max keep the first argument unless a later one compares strictly
    less/greater: ``max(1.0, nan)`` is 1.0, where torch.maximum (what tracing made of the
    builtins) gave nan."""
    model = Extremes()
    t = torch.tensor
    program = stitch.export(model, (torch.ones(2), t(1.0), t(2.0)),
                            examples=[((torch.ones(2), t(5.0), t(-2.0)), {})])
    nan = float("nan")
    for a, b in [(1.0, nan), (nan, 1.0), (7.0, 9.0), (3.0, 3.0)]:
        torch.testing.assert_close(program(torch.ones(2), t(a), t(b)),
                                   model(torch.ones(2), t(a), t(b)), equal_nan=True)
