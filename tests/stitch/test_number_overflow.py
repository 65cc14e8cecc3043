"""Int arithmetic on scalar reads past int64's range (``rt_int64.int64_check``), and checks
inside a torch.where's arms firing only in the arm taken (``arm_checks.py``).

A read is a 0-d int64 tensor in the program where the model had a Python int, which never
wraps: ``k + 1``, ``k - 1``, ``-k``, ``abs(k)``, ``k // -1`` and ``3 * k`` would wrap
silently at int64's ends (a sentinel such as int64's minimum is such a read). Each raises
``SpecializationError`` there. The examples never reach the ends:
verification could not have seen it."""

from __future__ import annotations

import re

import pytest
import torch

import stitch
from stitch.errors import SpecializationError

LOWEST, HIGHEST = -2 ** 63, 2 ** 63 - 1


class Pick(torch.nn.Module):
    """Each wrapping operator in its own arm of a data-dependent ``elif`` chain: the inner
    arms are torch.wheres (computed on every input), the outer ones torch.conds."""

    def forward(self, x, n, m, s):
        k, j, op = n.item(), m.item(), s.item()
        if op == 0:
            r = k + 1
        elif op == 1:
            r = k - 1
        elif op == 2:
            r = -k
        elif op == 3:
            r = abs(k)
        elif op == 4:
            r = k // -1
        elif op == 5:
            r = 3 * k
        elif op == 6:
            r = 5 - k
        else:
            r = k + j
        return x * float(r)


class GrowOrKeep(torch.nn.Module):
    def forward(self, x, n):
        k = n.item()
        if k < 100:
            y = x * (k + 1)
        else:
            y = x * 2
        return y


class AbsOrKeep(torch.nn.Module):
    def forward(self, x, n):
        k = n.item()
        if k > 0:
            y = x * abs(k)
        else:
            y = x * 2
        return y


class CheckedQuotient(torch.nn.Module):
    def forward(self, x, n):
        k = n.item()
        if k != 0:
            assert 10 // k < 5, "quotient too large"
        return x * 2


class RoundToTens(torch.nn.Module):
    def forward(self, x, n):
        k = n.item()
        if k > 100:
            x = x * 2
        return x * round(k, -1)


def _same(program, model, *args):
    torch.testing.assert_close(program(*args), model(*args), rtol=0, atol=0)


def _examples(*rows):
    return [(row, {}) for row in rows]


SYMBOLS = ["+", "-", "-", "abs", "//", "*", "-", "+"]


@pytest.fixture(scope="module")
def pick():
    x = torch.ones(2, dtype=torch.float64)
    model = Pick()
    rows = [(x, torch.tensor(k), torch.tensor(3), torch.tensor(op))
            for op in range(8) for k in (5, -7)]
    program = stitch.export(model, rows[0], examples=_examples(*rows))
    return model, program, x


@pytest.mark.parametrize("op, k, j", [
    (0, HIGHEST, 0), (1, LOWEST, 0), (2, LOWEST, 0), (3, LOWEST, 0), (4, LOWEST, 0),
    (5, 2 ** 62, 0), (5, -2 ** 62, 0), (6, -HIGHEST, 0), (7, 2 ** 62, 2 ** 62),
    (7, LOWEST, -1)])
def test_int_arithmetic_past_int64_raises(pick, op, k, j):
    """The model's Python int grows (``float(k + 1)`` is 2.0**63); the program's int64
    would wrap to the other end, a silently wrong sign."""
    model, program, x = pick
    args = (x, torch.tensor(k), torch.tensor(j), torch.tensor(op))
    model(*args)  # Python computes it
    with pytest.raises(SpecializationError, match=re.escape(
            f"`{SYMBOLS[op]}` of scalar reads: the int is past int64's range")):
        program(*args)


@pytest.mark.parametrize("op", range(8))
@pytest.mark.parametrize("k, j", [(HIGHEST, 0), (LOWEST, 0), (2 ** 62, -2 ** 62),
                                  (-(2 ** 61), 7), (0, HIGHEST), (0, LOWEST)])
def test_the_arms_not_taken_do_not_raise(pick, op, k, j):
    """At int64's ends the arms the model does not take would wrap, and their checks must
    not fire (they run on 1s there, ``rt_arith.calm``): the arm taken is exact, or
    raises where its own result is past int64."""
    model, program, x = pick
    args = (x, torch.tensor(k), torch.tensor(j), torch.tensor(op))
    expected = model(*args)
    python = [k + 1, k - 1, -k, abs(k), k // -1, 3 * k, 5 - k, k + j][op]
    if LOWEST <= python <= HIGHEST:
        torch.testing.assert_close(program(*args), expected, rtol=0, atol=0)
    else:
        with pytest.raises(SpecializationError, match="past int64's range"):
            program(*args)


def test_a_check_in_the_arm_not_taken_does_not_fire():
    """A torch.where computes both arms: at ``k = 2**63 - 1`` the model does not take
    ``k + 1``'s arm, and the program must not raise for it (the arm's operators run on 1s
    there, ``calm``); in the arm taken, it raises."""
    model = GrowOrKeep()
    x = torch.ones(3, dtype=torch.float64)
    program = stitch.export(model, (x, torch.tensor(5)), examples=_examples(
        (x, torch.tensor(5)), (x, torch.tensor(500))))
    assert program.report.graph_ops.get("where", 0) >= 1, str(program.report)
    assert not program.report.graph_ops.get("cond", 0), str(program.report)
    _same(program, model, x, torch.tensor(HIGHEST))
    _same(program, model, x, torch.tensor(LOWEST))
    _same(program, model, x, torch.tensor(99))


def test_a_number_function_in_the_arm_not_taken_does_not_fire():
    model = AbsOrKeep()
    x = torch.ones(3, dtype=torch.float64)
    program = stitch.export(model, (x, torch.tensor(5)), examples=_examples(
        (x, torch.tensor(5)), (x, torch.tensor(-5))))
    assert program.report.graph_ops.get("where", 0) >= 1, str(program.report)
    _same(program, model, x, torch.tensor(LOWEST))
    _same(program, model, x, torch.tensor(HIGHEST))


def test_a_branch_folded_into_its_checks_computes_them_only_where_taken():
    """``if k != 0: assert 10 // k < 5`` folds into one check computed on every input: at
    ``k = 0`` the model skips the assert, and the program raised ZeroDivisionError."""
    model = CheckedQuotient()
    x = torch.ones(3)
    program = stitch.export(model, (x, torch.tensor(5)))
    _same(program, model, x, torch.tensor(0))
    _same(program, model, x, torch.tensor(-1))
    with pytest.raises(AssertionError, match="quotient too large"):
        model(x, torch.tensor(1))
    with pytest.raises(AssertionError, match="quotient too large"):
        program(x, torch.tensor(1))


def test_round_to_tens_near_int64s_end_raises():
    model = RoundToTens()
    x = torch.ones(2, dtype=torch.float64)
    program = stitch.export(model, (x, torch.tensor(15)), examples=_examples(
        (x, torch.tensor(15)), (x, torch.tensor(505))))
    _same(program, model, x, torch.tensor(HIGHEST - 10))
    _same(program, model, x, torch.tensor(LOWEST + 5))
    model(x, torch.tensor(HIGHEST))  # rounds up past int64 in Python
    with pytest.raises(SpecializationError, match="`round` of scalar reads"):
        program(x, torch.tensor(HIGHEST))


class NestedConstant(torch.nn.Module):
    def forward(self, x, n):
        k = n.item()
        if k > 100:
            if k < 1000:
                r = k * 3
            else:
                r = k + 1
        else:
            r = 5 - k
        return x * float(r)


class FlagStep(torch.nn.Module):
    def forward(self, x, n):
        flag = (x.sum() > 0).item()
        k = n.item()
        if flag:
            r = k + flag
        else:
            r = k - flag
        return x * float(r)


@pytest.mark.parametrize("model, rows", [
    (NestedConstant, [(5,), (-7,), (500,), (-500,), (50,)]),
    (FlagStep, [(5,), (-7,), (500,), (-500,), (50,)]),
])
def test_forced_sides_with_int64_checks_still_export(model, rows):
    """Forced-side verification replaces the site's marked predicate; the arms' gates
    (``arm_when``) read the same marked predicate, so a forced arm's checks run on its own
    values, not on 1s (on 1s both models would be refused: VerificationError, output
    differs).
    Then the program agrees with the model up to int64's ends and raises only where the
    arm taken leaves int64."""
    x = torch.ones(2, dtype=torch.float64)
    examples = [((x, torch.tensor(k)), {}) for (k,) in rows]
    module = model()
    program = stitch.export(module, examples[0][0], examples=examples)
    for sign in (1.0, -1.0):
        for k in (0, 101, 999, 1000, -3, HIGHEST - 1, LOWEST + 6):
            _same(program, module, sign * x, torch.tensor(k))
    edge = LOWEST if model is NestedConstant else HIGHEST
    with pytest.raises(SpecializationError):  # 5 - LOWEST, HIGHEST + True: past int64
        program(x, torch.tensor(edge))


class Ratio(torch.nn.Module):
    def forward(self, x, n, m):
        k, j = n.item(), m.item()
        if k > 100:
            x = x * 2
        return x * (k / j), x * (k / 3)


def test_an_int_divided_by_an_int_is_exact_or_raises():
    """Python divides two ints exactly and rounds once; the program divides their doubles:
    the same wherever both ints are doubles exactly. ``(2**53 + 1) / 3`` is
    3002399751580331.0 in Python and 3002399751580330.5 from the doubles: the program
    raises there rather than give the second silently. A big int that is a
    double exactly (2**60) still divides."""
    model = Ratio()
    x = torch.ones(2, dtype=torch.float64)
    program = stitch.export(model, (x, torch.tensor(7), torch.tensor(2)), examples=_examples(
        (x, torch.tensor(7), torch.tensor(2)), (x, torch.tensor(700), torch.tensor(-3))))
    for k, j in ((2 ** 53, 3), (2 ** 60, 7), (LOWEST, 3), (-(2 ** 53), 2 ** 53), (5, 2 ** 62)):
        _same(program, model, x, torch.tensor(k), torch.tensor(j))
    big = 2 ** 53 + 1
    assert big / 3 != float(big) / 3  # the case: the doubles' quotient differs
    for k, j in ((big, 3), (3, big), (HIGHEST, 2)):
        with pytest.raises(SpecializationError, match="`/` of scalar reads"):
            program(x, torch.tensor(k), torch.tensor(j))


class ByHugeConstant(torch.nn.Module):
    def forward(self, x, n):
        k = n.item()
        if k > 100:
            x = x * 2
        return x * (k / (2 ** 60 + 1))


def test_an_int_constant_that_is_not_a_double_refuses_the_division():
    with pytest.raises(stitch.StitchError, match="2\\*\\*60|1152921504606846977"):
        stitch.export(ByHugeConstant(), (torch.ones(2), torch.tensor(7)))
