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


class SizesInABranch(torch.nn.Module):
    """Sizes printed and logged inside a data-dependent branch (a cond's arm): in an
    f-string, as a torch.Size, tuple or list, and as a logging argument."""

    def forward(self, x):
        y = x * 2
        if y.abs().max() > 1.0:
            print(f"big: shape={tuple(y.shape)} size={y.shape} n={y.shape[0]}")
            print("as args", y.shape, f"{list(y.shape)!r:>12}")
            logging.getLogger("tests.sizes").warning("rows %s %s", list(y.shape), y.size())
        return y


def test_sizes_printed_in_a_branch_follow_the_input(capsys, caplog):
    """The values of an f-string in a cond's arm leave the graph as its outputs: a tuple or
    list of sizes was formatted while traced ("(s77, 4)"), and a torch.Size came back from
    torch's pytree as a tuple ("(3, 4)" where eager prints "torch.Size([3, 4])")."""
    model = SizesInABranch()
    program = stitch.export(model, (torch.randn(3, 4) * 0.01,),
                            examples=[((torch.randn(5, 4) * 10,), {})])
    printed = []
    for x in (torch.randn(7, 4) * 10, torch.randn(2, 4) * 0.01):  # sizes no example had
        capsys.readouterr()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="tests.sizes"):
            model(x)
            eager = capsys.readouterr().out, [r.getMessage() for r in caplog.records]
            caplog.clear()
            program(x)
            assert (capsys.readouterr().out, [r.getMessage() for r in caplog.records]) == eager
        printed.append(eager)
    assert "size=torch.Size([7, 4]) n=7" in printed[0][0]
    assert printed[0][1] == ["rows [7, 4] torch.Size([7, 4])"] and printed[1] == ("", [])
