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
    t, f = _arms("rows, n", "rows.shape[0] > 0 and len(rows) < n")
    assert "holds(rows.shape[0] > 0 and len(rows) < n, True)" in t
    assert "holds(rows.shape[0] > 0 and len(rows) < n, False)" in f


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
