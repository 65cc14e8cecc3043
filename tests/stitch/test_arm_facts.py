"""Each arm of a cond on a size test notes its test (stitch/synthesize/canonicalize/arm_facts.py), and the
note decides guards in that arm only (capture/branch_asserts.py)."""

from __future__ import annotations

import ast

import sympy

from capture import arm_ranges, branch_asserts
from stitch.synthesize.canonicalize.arm_facts import assume_test


def _arms(params: str, test: str):
    true_fn = ast.parse(f"def t({params}):\n    return 1\n").body[0]
    false_fn = ast.parse(f"def f({params}):\n    return 2\n").body[0]
    assume_test(ast.parse(test, mode="eval").body, true_fn, false_fn)
    return ast.unparse(true_fn), ast.unparse(false_fn)


def test_a_pure_size_test_on_the_arms_parameters_is_noted_in_both_arms():
    t, f = _arms("rows, n", "not rows.shape[0] > n")
    assert "holds(rows.shape[0] > n, False)" in t
    assert "holds(rows.shape[0] > n, True)" in f


def test_boolean_and_chained_tests_are_noted_one_comparison_at_a_time():
    """Stated whole, Python takes the truth of the first symbolic comparison (``bool`` of a
    SymBool: a guard on the size in the arm); a side that does not say which part failed
    states nothing."""
    t, f = _arms("rows, n", "rows.shape[0] > 0 and len(rows) < n")
    assert "holds(rows.shape[0] > 0, True)" in t and "holds(len(rows) < n, True)" in t
    assert "holds" not in f
    t, f = _arms("x", "x.shape[-1] % 2 != 0 or x.shape[-2] % 2 != 0")
    assert "holds" not in t
    assert "holds(x.shape[-1] % 2 != 0, False)" in f and "holds(x.shape[-2] % 2 != 0, False)" in f
    t, f = _arms("x, n", "0 < x.shape[0] <= n")
    assert "holds(0 < x.shape[0], True)" in t and "holds(x.shape[0] <= n, True)" in t
    assert "holds" not in f


def test_tests_with_effects_or_reads_from_outside_are_left():
    for test in ("h.sum() > 0", "rows.shape[0] > limit", "next(it) > 0"):
        t, f = _arms("rows, h", test)
        assert "holds" not in t + f, test


def test_a_noted_fact_reaches_only_guards_inside_its_arm():
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    env = ShapeEnv()
    u = env.create_unbacked_symint()
    with branch_asserts.branch_local_asserts():
        branch_asserts.state_arm_fact(u > 0)  # no cond arm is being traced: not noted
        assert branch_asserts._FACTS == {}
    assert arm_ranges.decided_in_arm(env, sympy.Ne(u.node.expr, 0), []) is None
    assert env.var_to_range[u.node.expr].lower < 1  # the ShapeEnv was told nothing
