"""Size functions that would make a symbolic size a constant while torch.export traces.
``torch.Size.numel()`` fixes every dimension of the shape; in a size test stitch rewrites, a
shape's ``numel()`` is the product of its sizes, symbolic (``len_to_size.py``,
``rt_slices.size_numel``). ``float()`` of a size stays a symbolic float."""

from __future__ import annotations

import functools

import torch

import stitch


class EmptyCheck(torch.nn.Module):
    """kornia's ``perform_keep_shape_image`` tests its input so."""

    def forward(self, x):
        if x.shape.numel() == 0:
            raise ValueError("Invalid input tensor, it is empty.")
        return x * 2


def test_shape_numel_test_keeps_every_size_dynamic():
    model = EmptyCheck()
    program = stitch.export(model, (torch.randn(1, 3, 8, 8),),
                            examples=[((torch.randn(2, 3, 8, 8),), {}),
                                      ((torch.randn(3, 3, 6, 10),), {})])
    for shape in ((5, 3, 7, 7), (1, 3, 8, 8), (4, 3, 12, 5)):
        x = torch.randn(shape)
        torch.testing.assert_close(program(x), model(x))


def keep_shape(f):
    """A decorator as kornia's ``perform_keep_shape_image`` is written: the test is in the
    wrapper, a closure ``functools.wraps`` names after the function it wraps."""

    @functools.wraps(f)
    def _wrapper(x, *args, **kwargs):
        if x.shape.numel() == 0:
            raise ValueError("Invalid input tensor, it is empty.")
        return f(x.reshape(-1, *x.shape[-3:]), *args, **kwargs).reshape(x.shape)

    return _wrapper


@keep_shape
def brighten(x: torch.Tensor, amount: float) -> torch.Tensor:
    return (x + amount).clamp(0, 1)


class Brighten(torch.nn.Module):
    def forward(self, x):
        return brighten(x, 0.25)


def test_size_test_in_a_decorators_wrapper_is_rewritten_there():
    model = Brighten()
    program = stitch.export(model, (torch.rand(1, 3, 8, 8),),
                            examples=[((torch.rand(2, 3, 8, 8),), {}),
                                      ((torch.rand(3, 3, 6, 10),), {})])
    for shape in ((5, 3, 7, 7), (4, 3, 12, 5)):
        x = torch.rand(shape)
        torch.testing.assert_close(program(x), model(x))
    assert brighten.__code__.co_qualname == "keep_shape.<locals>._wrapper"  # put back


class FloatOfSize(torch.nn.Module):
    """kornia's LAF code: ``wf = float(max(w - 1, 1))`` of a size; ``float`` made the size a
    constant, kept symbolic instead (``rt_values.scalar``)."""

    def forward(self, x):
        w = x.shape[-1]
        wf = float(max(w - 1, 1))
        return x / wf


def test_float_of_a_size_stays_symbolic():
    model = FloatOfSize()
    program = stitch.export(model, (torch.randn(2, 3, 8, 8),),
                            examples=[((torch.randn(3, 3, 6, 10),), {})])
    for shape in ((2, 3, 5, 17), (1, 3, 4, 1)):
        x = torch.randn(shape)
        torch.testing.assert_close(program(x), model(x))
