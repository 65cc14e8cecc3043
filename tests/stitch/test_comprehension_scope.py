"""A comprehension's ``for`` binds its variable in its own scope (Python 3), not in the
function. A branch after ``[x[i] for i in range(n)]`` whose arm binds ``i`` itself (a later
``for i, s in enumerate(...)``, kornia's ``crop_by_indices``) must not be handed an ``i``
as an operand: there is none, and the rewritten function raised ``NameError``."""

from __future__ import annotations

import ast
import textwrap

import torch
from torch import nn

import stitch
from stitch.synthesize.analysis.names import bound_before, surely_bound


def _crop(x, n: int):
    slices = [x[i:i + 1] * 2 for i in range(n)]
    if x.sum() > 0:
        return torch.cat(slices)
    out = torch.zeros_like(x)
    for i, s in enumerate(slices):
        out[i] = s[0] + 1
    return out


class Crops(nn.Module):
    def forward(self, x):
        return _crop(x, x.shape[0]) * 2


def test_a_comprehension_variable_is_not_bound_in_the_function():
    func = ast.parse(textwrap.dedent("""
        def f(x, n):
            slices = [x[i] for i in range(n)]
            total = {k: v for k, v in zip(slices, slices)}
            if x.sum() > 0:
                pass
    """)).body[0]
    branch = func.body[-1]
    for names in (surely_bound(func, branch), bound_before(func, branch)):
        assert {"x", "n", "slices", "total"} <= names
        assert not names & {"i", "k", "v"}


def test_an_arm_binding_the_comprehension_variable_again_exports_exact():
    torch.manual_seed(0)
    up = torch.rand(3, 4) + 0.1  # the early return
    down = -torch.rand(3, 4) - 0.1  # the loop (one size: a count of a dynamic size unrolls)
    model = Crops()
    program = stitch.export(model, (up,), examples=[((down,), {})])
    for x in (up, down, torch.rand(3, 4) + 0.1, -torch.rand(3, 4) - 0.1):
        torch.testing.assert_close(program(x), model(x), rtol=0, atol=0)
