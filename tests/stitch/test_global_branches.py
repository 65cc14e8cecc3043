"""Module globals a forward changes under a ``global`` declaration: set to a value of tensors
it computes, or only added to (a counter), at the top level or inside a data-dependent
branch. The cond's arm functions do not inherit the ``global`` declaration (an arm setting
``X`` would bind a local: UnboundLocalError), so the branch rewrite sets them as the module's
attributes, replayed by the epilogue (``rebind`` and ``add`` entries) when the branch ran."""

from __future__ import annotations

import sys

import pytest
import torch
from torch import nn

import stitch

TOTAL = 0.0  # a float counter a branch subtracts from
ROWS = 0  # an int counter a branch adds a size to
LAST = None  # a tensor a branch sets, read again in the same arm
SEEN = None  # a tensor the forward sets on every call, at the top level


class GlobalsInABranch(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        global TOTAL, ROWS, LAST, SEEN
        h = self.lin(x)
        SEEN = h.amax()
        if h.sum() > 0:
            TOTAL -= 0.1
            ROWS += x.shape[0]
            LAST = h.mean(0)
            h = h + LAST  # reads the value it just set
        else:
            ROWS = ROWS + 2 * x.shape[0]
            h = h - 1
        return h


class UnpacksAGlobal(nn.Module):
    def forward(self, x):
        global LAST
        h = x * 2
        if h.sum() > 0:
            LAST, h = h.mean(), h + 1
        else:
            h = h - 1
        return h


DIM = ({0: torch.export.Dim("rows", min=2, max=64)},)
_HERE = sys.modules[__name__]


def _reset() -> None:
    global TOTAL, ROWS, LAST, SEEN
    TOTAL, ROWS, LAST, SEEN = 0.0, 0, None, None


@pytest.fixture(autouse=True)
def _fresh_globals():
    _reset()
    yield
    _reset()


def _sides(model: nn.Module):
    x = torch.randn(3, 4) * 100
    if model.lin(x).sum() < 0:
        x = -x
    assert model.lin(x).sum() > 0 > model.lin(-x).sum()
    return x, [((x,), {}), ((-x,), {})]


def _state():
    return (TOTAL, ROWS, None if LAST is None else LAST.clone(),
            None if SEEN is None else SEEN.clone())


def test_globals_a_branch_sets_and_counts_in_are_replayed_when_it_ran():
    torch.manual_seed(3)
    model = GlobalsInABranch()
    x, sides = _sides(model)
    program = stitch.export(model, (x,), examples=sides, dynamic_shapes=DIM)
    entries = [(e.kind, e.options["target"].rpartition(".")[2], e.guard is not None)
               for e in program.epilogue.entries]
    assert ("add", "TOTAL", True) in entries and ("rebind", "LAST", True) in entries
    assert ("rebind", "SEEN", False) in entries  # top level: on every call
    assert sum(k == "add" and t == "ROWS" for k, t, _ in entries) == 2  # one per side
    assert _state() == (0.0, 0, None, None)  # stitch put the module's globals back
    inputs = [x, -x, torch.cat([x, x]), torch.cat([-x, -x, -x]), x[:2]]
    outs = [program(t) for t in inputs]
    replayed = _state()
    _reset()
    eager = [model(t) for t in inputs]
    expected = _state()
    for a, b in zip(outs, eager, strict=True):
        torch.testing.assert_close(a, b)
    assert replayed[:2] == expected[:2]  # the floats bit for bit
    assert expected[0] <= -0.2 and expected[1] >= 3 + 6 + 6 + 18  # both sides ran
    torch.testing.assert_close(replayed[2], expected[2])
    torch.testing.assert_close(replayed[3], expected[3])


@pytest.mark.parametrize("dropped", ["add", "rebind"])
def test_a_dropped_global_replay_in_a_branch_is_caught_by_verification(drop_guarded_replays,
                                                                       dropped):
    """Sabotage: the epilogue skips the branch's additions (or its set) of the globals;
    verification compares the globals the model changed with what the program left."""
    drop_guarded_replays(dropped)
    torch.manual_seed(3)
    model = GlobalsInABranch()
    x, sides = _sides(model)
    with pytest.raises(stitch.VerificationError):
        stitch.export(model, (x,), examples=sides, dynamic_shapes=DIM)


def test_a_global_set_by_unpacking_in_a_branch_is_refused_naming_the_form():
    torch.manual_seed(0)
    x = torch.randn(3, 4).abs()
    with pytest.raises(stitch.StitchError,
                       match=r"module global `LAST` otherwise than `LAST = \.\.\.`"):
        stitch.export(UnpacksAGlobal(), (x,), examples=[((x,), {}), ((-x,), {})])
    assert LAST is None and _HERE.LAST is None


# a fuzz program whose arms are traced by Dynamo, which refuses a ``globals()`` call: the
# rewrite must reach the module of ``TOTAL`` without one
RETURNS = """\
        TOTAL -= 0.1
        assert h.abs().max().item() < 1e4, 'a2 overflow'
        if (h.max() > 0.3) and (h.min() < -0.3):
            TOTAL -= 0.1
            return h * 2.0, n, scale
        elif h.mean() > -0.3:
            h = h + self.count
        else:
            TOTAL -= 0.1
            assert h.abs().max().item() < 1e4, 'a6 overflow'
        return h * (1.0 + 0.1 * n) * scale, n, scale
"""


def test_a_global_counted_in_branches_that_return_is_replayed(tmp_path):
    from tests.zoo import fuzz

    module = fuzz.load_program(fuzz.HEADER + RETURNS, str(tmp_path))
    model = module.Fuzz()
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(4, 8, generator=g) * s for s in (3.0, 0.1)]
    program = stitch.export(model, (xs[0],), examples=[((x,), {}) for x in xs])
    inputs = [*xs, -xs[1] - 1, xs[0]]
    for x in inputs:
        program(x)
    replayed, module.TOTAL = module.TOTAL, 0.0
    for x in inputs:
        module.Fuzz()(x)
    assert replayed == module.TOTAL < -0.4
