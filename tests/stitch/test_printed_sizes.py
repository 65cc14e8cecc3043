"""A printed or logged size of a dynamic dimension, alone or inside a torch.Size, tuple or
list, is the size of each call's input, not the symbol torch.export traced."""

from __future__ import annotations

import logging

import pytest
import torch

import stitch


class PrintsSize(torch.nn.Module):
    def forward(self, x):
        print("size", x.shape)
        return x + 1


class PrintsTuple(torch.nn.Module):
    def forward(self, x):
        print("shape", tuple(x.shape), [x.size(0), [x.size(1), x.size(0)]])
        return x + 1


class LogsShape(torch.nn.Module):
    def forward(self, x):
        logging.getLogger("tests.sizes").warning("batch %s of %s", x.size(0), list(x.shape))
        return x + 1


@pytest.mark.parametrize("model", [PrintsSize, PrintsTuple])
def test_printed_sizes_follow_the_input(model, capsys):
    program = stitch.export(model(), (torch.randn(3, 4),),
                            examples=[((torch.randn(5, 4),), {})])
    capsys.readouterr()
    x = torch.randn(7, 4)  # a size no example had
    model()(x)
    eager = capsys.readouterr().out
    program(x)
    assert capsys.readouterr().out == eager and "7" in eager


def test_logged_sizes_follow_the_input(caplog):
    program = stitch.export(LogsShape(), (torch.randn(3, 4),),
                            examples=[((torch.randn(5, 4),), {})])
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tests.sizes"):
        program(torch.randn(6, 4))
    assert [r.getMessage() for r in caplog.records] == ["batch 6 of [6, 4]"]
