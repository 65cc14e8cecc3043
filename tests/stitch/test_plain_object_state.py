"""State on plain Python objects the model holds (``capture/owners.py``): a counter, a list
and a value kept on a helper object (``self.policy.n += 1`` in ``Policy.apply``) are
measured at their paths (``policy.n``), replayed after the graph and verified, as a
module's own attributes are."""

from __future__ import annotations

import types

import pytest
import torch
from torch import nn

import stitch
from capture.owners import holder_keys, owner_at, state_owners


class Policy:
    def __init__(self) -> None:
        self.n = 0
        self.seen = []

    def apply(self, h):
        if h.mean() > 0:
            self.n += 1
            self.seen.append(h.sum())
            return h * 2.0
        return h - 1.0


class Holder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.policy = Policy()

    def forward(self, x):
        return self.policy.apply(self.lin(x))


def _sides():
    """One input per side of ``Policy.apply``'s test."""
    torch.manual_seed(0)
    model = Holder()
    with torch.no_grad():
        model.lin.weight.copy_(torch.eye(4))
        model.lin.bias.zero_()
    return model, torch.ones(2, 4), -torch.ones(2, 4)


def test_a_counter_and_a_list_on_a_held_object_in_a_branch_are_replayed():
    model, up, down = _sides()
    program = stitch.export(model, (up,), examples=[((down,), {})])
    assert program.report.graphs_after == 1
    assert {e.options["target"] for e in program.epilogue.entries} == {"policy.n",
                                                                     "policy.seen"}
    reference = Holder()
    reference.load_state_dict(model.state_dict())
    model.policy.n, model.policy.seen = 0, []
    for x in (up, down, up * 3, down):
        torch.testing.assert_close(program(x), reference(x))
    assert model.policy.n == reference.policy.n == 2
    assert len(model.policy.seen) == 2
    torch.testing.assert_close(torch.stack(model.policy.seen),
                               torch.stack(reference.policy.seen))


class ReadsItsCount(Holder):
    def forward(self, x):
        h = self.policy.apply(self.lin(x))
        return h * self.policy.n  # the old count read: the program would hold it


def test_a_held_objects_count_read_back_is_refused_naming_it():
    model, up, down = _sides()
    with pytest.raises(stitch.UnsupportedSideEffectError,
                       match=r"test_plain_object_state.py:\d+: forward mutates attribute 'n' "
                       r"of object policy(.|\n)*unchecked_state=\('policy.n',\)"):
        stitch.export(ReadsItsCount(), (up,), examples=[((down,), {})])


class Inner:
    def __init__(self) -> None:
        self.k = 1


def test_owners_are_listed_once_by_their_first_path_and_resolved():
    shared = types.SimpleNamespace(inner=Inner())
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    model[0].cfg = shared
    model[1].cfg = shared  # the same object: one path
    paths = dict((p, o) for p, o in state_owners(model) if not isinstance(o, nn.Module))
    assert list(paths) == ["0.cfg", "0.cfg.inner"]
    assert owner_at(model, "0.cfg.inner") is shared.inner
    assert owner_at(model, "1") is model[1]
    with pytest.raises(AttributeError, match="'nope'"):
        owner_at(model, "0.cfg.nope")
    assert holder_keys("0.cfg.inner") == [("<root>", "0"), ("0", "cfg"), ("0.cfg", "inner")]
