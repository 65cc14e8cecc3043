"""Python numbers the model returns: the program gives them back as numbers of the kind
the graph computed (a read is a double, an int64 or a bool), never cut to the kind example
0 happened to return."""

from __future__ import annotations

import pytest
import torch

import stitch
from stitch.errors import VerificationError


class ClampRead(torch.nn.Module):
    def forward(self, x):
        v = x.sum().item()
        s = max(v, 0)  # Python: the int 0 where v < 0, else the float v
        return x * s, s


def test_a_number_whose_kind_follows_the_data_is_never_cut_to_example_zeros():
    """Example 0 picks the float: every float comes back whole (6.5 was returned as 6
    where example 0 had picked the int), and the int side comes back equal in value (as
    a float: the kind of ``max(v, 0)`` follows the data, named in guarantees.md)."""
    model, x = ClampRead(), torch.tensor([1.5, 2.0, 3.0])
    program = stitch.export(model, (x,))
    for t in (x, x * 0.1, -x):
        got, want = program(t)[1], model(t)[1]
        assert got == want, (got, want)
        if isinstance(want, float):
            assert isinstance(got, float)


def test_an_example_that_returns_the_other_kind_is_refused():
    """Example 0 picks the int 0: the program's double differs by kind, refused (it was
    returned as ``int(6.5)``, 6, for every later input)."""
    x = torch.tensor([1.5, 2.0, 3.0])
    with pytest.raises(VerificationError, match="differ by kind"):
        stitch.export(ClampRead(), (-x,))
