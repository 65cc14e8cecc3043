"""A runtime assertion made while torch traces one arm of a cond holds for that arm only
(capture/branch_asserts.py; torch 2.14 hoists it to the whole graph, pytorch#165912)."""

from __future__ import annotations

import torch

import stitch
from capture.branch_asserts import available, branch_local_asserts


def regroup(rows):
    # with no row, `reshape(-1, 4)` of an (n, 6) tensor is valid only because n == 0: the
    # false arm asserts 6n % 4 == 0, the true arm n != 0
    if rows.shape[0] > 0:
        return rows.reshape(rows.shape[0], -1)[:, :4] * 2
    return rows.reshape(-1, 4)


class Regroups(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(6, 6)

    def forward(self, x):
        h = self.lin(x)
        rows = h[(h[:, 0] > 0).nonzero()[:, 0]]
        return regroup(rows)


def _inputs(model):
    x = torch.randn(5, 6, generator=torch.Generator().manual_seed(1))
    w, b = model.lin.weight[0].detach(), model.lin.bias[0].detach()
    none_kept = (-w / w.dot(w) * (b.abs() + 10)).expand(5, 6).clone()  # lin(row)[0] < 0
    return x, none_kept


class CondOnASize(torch.nn.Module):
    def forward(self, x, k):
        rows = x[: k.nonzero().shape[0]]
        n = rows.shape[0]
        return torch.cond(torch.full((), n > 0, dtype=torch.bool),
                          lambda r: r.reshape(r.shape[0], -1)[:, :4] * 2,
                          lambda r: r.reshape(-1, 4).clone(), (rows,))


def _assertions(ep) -> list[str]:
    return [n.args[1] for n in ep.graph.nodes if n.target is torch.ops.aten._assert_scalar.default]


def test_this_torch_has_the_frames_the_workaround_reads():
    assert available()


def test_arm_assertions_are_conditioned_on_their_arm_in_torch_export():
    x, k = torch.randn(5, 6), torch.tensor([1, 0, 1, 1, 0])
    with branch_local_asserts():
        ep = torch.export.export(CondOnASize(), (x, k))
    texts = _assertions(ep)
    assert any("(u0 <= 0) | Ne(u0, 0)" in t for t in texts), texts
    assert not any("expression Ne(u0, 0)" in t for t in texts), texts
    for rows in (3, 0, 2):  # (torch.cond run eagerly traces both arms: not a reference)
        k = torch.tensor([1] * rows + [0] * (5 - rows))
        want = x[:rows, :4] * 2 if rows else torch.empty(0, 4)
        assert torch.equal(ep.module()(x, k), want)
    # outside the context torch behaves as it does on its own: hoisted, the graph fails
    # on the input with no row
    ep = torch.export.export(CondOnASize(), (x, torch.tensor([1, 0, 1, 1, 0])))
    assert any("expression Ne(u0, 0)" in t for t in _assertions(ep))


def test_a_branch_on_a_size_whose_arms_assert_different_facts_is_one_verified_graph():
    model = Regroups()
    x, none_kept = _inputs(model)
    program = stitch.export(model, (x,), examples=[((none_kept,), {}), ((x * 3,), {})])
    assert program.report.graphs_after == 1 and program.report.graph_ops.get("cond") == 1, \
        str(program.report)
    for v in (x, none_kept, x * 3, -x):
        with torch.no_grad():
            got, want = program(v), model(v)
        assert got.shape == want.shape and torch.equal(got, want)
    with torch.no_grad():
        assert model(none_kept).shape == (0, 4) and model(x).shape[0] > 0


def test_a_guard_in_an_arm_is_decided_by_the_arms_condition_only():
    import sympy
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    from capture.arm_ranges import bounds, decided_in_arm

    env = ShapeEnv()
    u = env.create_unbacked_symint().node.expr
    not_zero = sympy.Ne(4 * u, 0)
    assert decided_in_arm(env, not_zero, [u > 0]) == sympy.true
    assert decided_in_arm(env, not_zero, [sympy.Min(150, u) > 0]) == sympy.true
    assert decided_in_arm(env, not_zero, []) is None  # outside an arm: torch's own error
    assert decided_in_arm(env, u > 3, [u > 0]) is None  # not implied: still unknown
    assert env.var_to_range[u].lower != 1  # the ShapeEnv itself learned nothing
    assert bounds(sympy.Eq(u, 0)) == {u: (0, 0)} and bounds(u <= 2) == {u: (-sympy.oo, 2)}


class ReshapesByAnotherCount(torch.nn.Module):
    def forward(self, x, k):
        rows = x[(x[:, 0] > 0).nonzero()[:, 0]]
        other = x[k.nonzero()[:, 0]]  # a count the predicate's does not bound
        n = rows.shape[0]
        if n > 0:  # the arm asserts Mod(6*u1, u0) == 0: with u0 == 0 the other arm runs
            out = other.reshape(n, -1)[:, :2] * 2
        else:
            out = other[:, :2] + 1
        return out


def test_an_arm_assertion_dividing_by_the_predicates_size_runs_on_the_general_side():
    # the conditioned assertion is evaluated whole ("or" of two graph values): its divisor
    # is read as Max(d, 1), so the side with n == 0 does not divide by zero
    model = ReshapesByAnotherCount()
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(1))
    x[:2, 0], x[2:, 0] = 1.0, -1.0
    k = torch.tensor([1, 1, 0, 0])
    program = stitch.export(model, (x, k), examples=[((-x.abs(), k), {})])
    texts = _assertions(program.exported_program)
    assert any("Max(1, u0)" in t for t in texts), texts
    for args in ((x, k), (-x.abs(), k), (-x.abs(), torch.tensor([1, 1, 1, 0]))):
        with torch.no_grad():
            assert torch.equal(program(*args), model(*args))
