"""Operators on scalar reads follow Python's number rules in the program
(``synthesize/convert/number_ops.py``, ``rt_arith.py``): a tensor's rules would return 0 or inf
where the model raises or gives 0.5. Each test exports from examples that never reach the case, then calls the
program on an input that does: verification could not have seen it."""

from __future__ import annotations

import functools
import math
import operator
from math import trunc

import pytest
import torch

import stitch
from stitch.errors import SpecializationError


class Divide(torch.nn.Module):
    def forward(self, x, a, b):
        return x * (a.item() / b.item()), x * (a.item() // b.item()), x * (a.item() % b.item())


class Shift(torch.nn.Module):
    def forward(self, x, n):
        k = n.item()
        return x * (1 << k)


class Power(torch.nn.Module):
    def forward(self, x, n):
        k = n.item()
        return x * (2 ** k), x * (2.0 ** k)


class IntOfFloat(torch.nn.Module):
    def forward(self, x, b):
        return x * int(b.item())


class FlagSum(torch.nn.Module):
    def forward(self, x):
        flag = (x.sum() > 0).item()
        return x * (flag + flag), x * -flag


class ThirdOfCount(torch.nn.Module):
    def forward(self, x, n):
        k = n.item()
        return x * (k / 3)


class Counter(torch.nn.Module):
    def forward(self, x, n):
        k = n.item()
        k += 1
        if k > 2:
            return x * k
        return x - k


class GuardedDivide(torch.nn.Module):
    def forward(self, x, n):
        k = n.item()
        if k != 0:
            y = x * (10 / k)
        else:
            y = x
        return y


class SometimesATensor(torch.nn.Module):
    def forward(self, x):
        s = x.sum().item()
        if s > 100:
            x = x * 2
        s = x.sum()
        return x / s


def _same(program, model, *args):
    expected = model(*args)
    torch.testing.assert_close(program(*args), expected, rtol=0, atol=0, equal_nan=True)


def _raises_as_model(program, model, *args):
    with pytest.raises(Exception) as expected:
        model(*args)
    with pytest.raises(type(expected.value), match=str(expected.value)):
        program(*args)


def test_division_by_a_zero_read_raises_as_python():
    x = torch.ones(3, dtype=torch.float64)
    model = Divide()
    for kind in (int, float):
        program = stitch.export(model, (x, torch.tensor(kind(7)), torch.tensor(kind(2))))
        _same(program, model, x, torch.tensor(kind(-7)), torch.tensor(kind(3)))
        _raises_as_model(program, model, x, torch.tensor(kind(7)), torch.tensor(kind(0)))


def test_a_negative_shift_count_raises_as_python():
    x = torch.ones(3)
    model = Shift()
    program = stitch.export(model, (x, torch.tensor(3)))
    _same(program, model, x, torch.tensor(5))
    _raises_as_model(program, model, x, torch.tensor(-1))


def test_an_int_power_with_a_negative_exponent_is_refused_loudly():
    """Python's ``2 ** -1`` is the float 0.5; the program computes ints there, so it raises
    naming the operation (it returned 0). The float power is right for every exponent."""
    x = torch.ones(3, dtype=torch.float64)
    model = Power()
    program = stitch.export(model, (x, torch.tensor(3)))
    _same(program, model, x, torch.tensor(10))
    with pytest.raises(SpecializationError, match="negative int power"):
        program(x, torch.tensor(-1))


def test_int_of_an_infinite_or_nan_read_raises_as_python():
    x = torch.ones(3)
    model = IntOfFloat()
    program = stitch.export(model, (x, torch.tensor(2.5)))
    _same(program, model, x, torch.tensor(-3.5))
    _raises_as_model(program, model, x, torch.tensor(float("inf")))
    _raises_as_model(program, model, x, torch.tensor(float("nan")))


def test_arithmetic_on_a_bool_read_is_int_arithmetic():
    """``True + True`` is 2 (a bool tensor's ``+`` is a logical or: 1) and ``-True`` is -1;
    the example reads False, where both agree."""
    model = FlagSum()
    program = stitch.export(model, (-torch.ones(3),))
    _same(program, model, torch.ones(3))


def test_an_int_divided_by_an_int_is_a_double():
    x = torch.ones(3, dtype=torch.float64)
    model = ThirdOfCount()
    program = stitch.export(model, (x, torch.tensor(3)))
    _same(program, model, x, torch.tensor(7))  # 7 / 3 in float32 differs in the 8th digit


def test_an_augmented_assignment_to_a_read_does_not_write_the_tensor_read():
    """``k = n.item(); k += 1``: the read is no view of ``n`` that ``+=`` could write into
    (outputs would differ from eager)."""
    model = Counter()
    program = stitch.export(model, (torch.ones(3), torch.tensor(3)))
    n = torch.tensor(0)
    _same(program, model, torch.ones(3), n)
    assert n.item() == 0


def test_a_division_the_test_rules_out_at_zero_does_not_raise():
    """The arm dividing by the read may raise, so the branch is a torch.cond (a
    torch.where would compute it on the input whose test rules it out)."""
    x = torch.ones(3, dtype=torch.float64)
    model = GuardedDivide()
    program = stitch.export(model, (x, torch.tensor(4)))
    _same(program, model, x, torch.tensor(0))
    _same(program, model, x, torch.tensor(5))


def test_a_name_that_is_a_tensor_when_divided_keeps_the_tensor_rule():
    """``s`` is a read first and a tensor at the division: the model gives inf at 0, and
    so does the program (a tensor's ``/`` does not raise)."""
    model = SometimesATensor()
    program = stitch.export(model, (torch.ones(3),))
    x = torch.tensor([1.0, -1.0, 0.0])
    _same(program, model, x)


class PrintsLarge(torch.nn.Module):
    def forward(self, x):
        s = x.sum().item()
        if s > 100:
            print("large", s, -s)
        return x * 2


def test_a_read_printed_in_a_branch_prints_as_a_number(capfd):
    """torch.cond hands its arms new tensors, which had lost the mark of a read: the
    program printed ``large tensor(150., dtype=torch.float64)`` where the model prints
    ``large 150.0`` (refused before, whether or not an example took the branch)."""
    model = PrintsLarge()
    for examples in ([((torch.ones(3),), {})],
                     [((torch.ones(3),), {}), ((torch.full((3,), 50.0),), {})]):
        program = stitch.export(model, examples[0][0], examples=examples)
        capfd.readouterr()
        program(torch.full((3,), 50.0))
        assert capfd.readouterr().out == "large 150.0 -150.0\n"


class ScaledInBranch(torch.nn.Module):
    def forward(self, x, n):
        k = n.item()
        if x.sum() > 0:
            k = k * 2
        return x * (12 // k)


def test_a_read_a_branch_changes_keeps_pythons_rules_after_it():
    """``k`` leaves the torch.cond as the number it was in both arms, so ``12 // k`` at 0
    raises ``ZeroDivisionError`` as in the model (a tensor's ``//`` gave a number)."""
    model = ScaledInBranch()
    x = torch.ones(3, dtype=torch.float64)
    program = stitch.export(model, (x, torch.tensor(3)), examples=[((x, torch.tensor(3)), {}),
                                                                   ((-x, torch.tensor(2)), {})])
    _same(program, model, x, torch.tensor(5))
    _raises_as_model(program, model, x, torch.tensor(0))
    _raises_as_model(program, model, -x, torch.tensor(0))


class PrintsArithmetic(torch.nn.Module):
    def forward(self, x, n):
        k = n.item()
        print("scaled", k * 2, k / 4, -k)
        return x * 2


def test_arithmetic_on_a_read_prints_as_a_number(capfd):
    """``k * 2`` prints as ``10``, not ``tensor(10)``: what an operator makes of reads is
    marked as a number too."""
    model = PrintsArithmetic()
    program = stitch.export(model, (torch.ones(3), torch.tensor(3)))
    capfd.readouterr()
    program(torch.ones(3), torch.tensor(5))
    assert capfd.readouterr().out == "scaled 10 1.25 -5\n"


class DividesInArm(torch.nn.Module):
    def forward(self, x, a, b):
        p = a.item()
        q = b.item()
        if x.sum() > 0:
            y = x * (p / q)
        else:
            y = x
        return y


def test_an_operator_on_reads_inside_a_branch_keeps_pythons_rules():
    """torch.cond traces its arms with Dynamo, where a read's mark is not seen: ``p`` and
    ``q`` are numbers by the source (every assignment is a read), so ``p / q`` in the arm
    raises at 0 as in the model (it gave inf) and divides ints as doubles."""
    model = DividesInArm()
    x = torch.ones(3, dtype=torch.float64)
    program = stitch.export(model, (x, torch.tensor(1), torch.tensor(3)),
                            examples=[((x, torch.tensor(1), torch.tensor(3)), {}),
                                      ((-x, torch.tensor(1), torch.tensor(3)), {})])
    _same(program, model, x, torch.tensor(2), torch.tensor(7))
    _same(program, model, -x, torch.tensor(2), torch.tensor(0))
    _raises_as_model(program, model, x, torch.tensor(2), torch.tensor(0))


class RootWhereDefined(torch.nn.Module):
    def forward(self, x, a):
        v = a.item()
        if v >= 0:
            r = v ** 0.5
        else:
            r = -v
        return x * r


def test_a_power_the_test_rules_out_is_not_computed_on_the_general_side():
    """``v ** 0.5`` may raise (a negative base, Python's complex number): the branch is a
    torch.cond, which runs only the arm taken, not a torch.where, which runs both."""
    model = RootWhereDefined()
    x = torch.ones(3, dtype=torch.float64)
    program = stitch.export(model, (x, torch.tensor(4.0)))
    _same(program, model, x, torch.tensor(9.0))
    _same(program, model, x, torch.tensor(-9.0))


class ScaleOrShift(torch.nn.Module):
    def forward(self, x, n):
        k = n.item()
        if x.sum() > 0:
            s = k * 2.5 + 1
        else:
            s = k / 4
        return x * s


def test_operators_that_cannot_raise_keep_a_branch_a_where():
    """The runtime's operators are pure and elementwise: a branch of them stays a
    torch.where (the cost rule, ``where_rule.py``), as when they were tensor operators."""
    model = ScaleOrShift()
    x = torch.ones(3, dtype=torch.float64)
    program = stitch.export(model, (x, torch.tensor(3)), examples=[((x, torch.tensor(3)), {}),
                                                                   ((-x, torch.tensor(3)), {})])
    assert program.report.graph_ops.get("where", 0) >= 1, str(program.report)
    assert not program.report.graph_ops.get("cond", 0), str(program.report)
    _same(program, model, x, torch.tensor(0))
    _same(program, model, -x, torch.tensor(7))


class BitwiseThenAdd(torch.nn.Module):
    def forward(self, x):
        a = (x.sum() > 0).item()
        b = (x.max() > 5).item()
        return x * ((a ^ b) + a)


def test_arithmetic_after_a_bitwise_op_on_bool_reads():
    """``a ^ b`` of two bool reads is a bool in Python, and ``+ a`` on it int arithmetic
    (2); unrouted, the bitwise operator's result would lose the read's mark and ``+``
    would be a bool tensor's logical or (1)."""
    model = BitwiseThenAdd()
    program = stitch.export(model, (-torch.ones(3),))
    _same(program, model, torch.ones(3))


class CountPositive(torch.nn.Module):
    def forward(self, x, n, m):
        a = n.item()
        b = m.item()
        return x * ((a > 0) + (b > 0))


def test_a_comparison_of_reads_is_a_bool_in_arithmetic():
    """``(a > 0) + (b > 0)`` is 2 when both hold (a bool tensor's ``+``: 1)."""
    model = CountPositive()
    x = torch.ones(3)
    program = stitch.export(model, (x, torch.tensor(-1), torch.tensor(-1)))
    _same(program, model, x, torch.tensor(1), torch.tensor(1))


class UnpackedReads(torch.nn.Module):
    def forward(self, x, n, m):
        a, b = n.item(), m.item()
        return x * (a / b)


class ReadsInAList(torch.nn.Module):
    def forward(self, x, n, m):
        values = [n.item(), m.item()]
        total = 0
        for v in values:
            total += v
        return x * (values[0] / values[1]) + total


def test_reads_bound_by_unpacking_or_kept_in_a_list_divide_as_python():
    """A read bound by unpacking, kept in a list or taken by a loop over one is followed:
    ``a / b`` divides ints as doubles and raises at 0 (a float32 tensor division, inf)."""
    x = torch.ones(3, dtype=torch.float64)
    for model in (UnpackedReads(), ReadsInAList()):
        program = stitch.export(model, (x, torch.tensor(6), torch.tensor(3)))
        _same(program, model, x, torch.tensor(7), torch.tensor(3))
        _raises_as_model(program, model, x, torch.tensor(7), torch.tensor(0))


class NumberFunctions(torch.nn.Module):
    def forward(self, x, n, v):
        k = n.item()
        f = v.item()
        if k > 100:  # a data-dependent branch: torch.export alone refuses the model
            x = x * 2
        return (x * (1 / abs(k)), x * operator.truediv(k, 3), x * (math.floor(f) / 2),
                x * (round(f) // 1), x * (sum([k, k]) / 3), x * (trunc(f) / 2))


def test_builtin_math_and_operator_functions_on_reads_keep_pythons_rules():
    """``abs``, ``operator.truediv``, ``math.floor``, ``round``, ``sum``, ``trunc`` (imported
    by name) of reads give the number Python gives, with its kind: ``1 / abs(k)`` at 0
    raises (it was inf), ``operator.truediv(k, 3)`` is a double, ``math.floor(f)`` of inf
    raises."""
    model = NumberFunctions()
    x = torch.ones(3, dtype=torch.float64)
    program = stitch.export(model, (x, torch.tensor(2), torch.tensor(2.5)))
    for args in ((x, torch.tensor(-7), torch.tensor(3.5)), (x, torch.tensor(5), torch.tensor(-0.5))):
        for got, want in zip(program(*args), model(*args), strict=True):
            torch.testing.assert_close(got, want, rtol=0, atol=0)
    _raises_as_model(program, model, x, torch.tensor(0), torch.tensor(1.5))
    _raises_as_model(program, model, x, torch.tensor(1), torch.tensor(float("inf")))


class SquareRoot(torch.nn.Module):
    def forward(self, x, v):
        return x * math.sqrt(v.item())


def test_math_sqrt_of_a_read_is_one_graph_raising_as_python():
    """``math.sqrt`` of a read would read the tensor back to Python (a graph break). It is
    ``torch.sqrt`` in the graph, with Python's domain error. Its value is torch's: on this
    CPU ``sqrt(2.0)`` is one ulp from Python's."""
    model = SquareRoot()
    x = torch.ones(3, dtype=torch.float64)
    program = stitch.export(model, (x, torch.tensor(4.0)))
    torch.testing.assert_close(program(x, torch.tensor(2.0)), model(x, torch.tensor(2.0)),
                               rtol=1e-15, atol=0)
    _raises_as_model(program, model, x, torch.tensor(-1.0))


class Powers(torch.nn.Module):
    def forward(self, x, n, v):
        k = n.item()
        f = v.item()
        return x * ((2 ** k) % 7), x * ((1 << k) % 7), x * (10.0 ** f)


def test_powers_and_shifts_past_int64_or_the_largest_double_are_refused_loudly():
    """Python's int grows and its float power raises ``OverflowError``; int64 wrapped to 0
    and the double power was inf. The program raises: a ``SpecializationError`` naming the
    operator for the int, Python's ``OverflowError`` for the float."""
    model = Powers()
    x = torch.ones(3, dtype=torch.float64)
    program = stitch.export(model, (x, torch.tensor(3), torch.tensor(2.0)))
    _same(program, model, x, torch.tensor(62), torch.tensor(300.0))
    with pytest.raises(SpecializationError, match="past int64"):
        program(x, torch.tensor(70), torch.tensor(2.0))
    _raises_as_model(program, model, x, torch.tensor(3), torch.tensor(400.0))


class ProductOfReads(torch.nn.Module):
    def forward(self, x, n, m):
        a = n.item()
        b = m.item()
        return x * ((a * b) % 7)


def test_a_product_of_int_reads_past_int64_is_refused_loudly():
    model = ProductOfReads()
    x = torch.ones(3)
    program = stitch.export(model, (x, torch.tensor(3), torch.tensor(4)))
    _same(program, model, x, torch.tensor(2 ** 31), torch.tensor(2 ** 31))
    with pytest.raises(SpecializationError, match="past int64"):
        program(x, torch.tensor(2 ** 40), torch.tensor(2 ** 40))


class ComparesWithFloats(torch.nn.Module):
    def forward(self, x, n, v):
        k = n.item()
        f = v.item()
        if k > 16777216.0:  # in a test: an int read against a float constant
            x = x + 1
        return x * (k == f), x * (k > f), x * (k < 16777216.5)


def test_an_int_read_compares_with_a_float_exactly():
    """A tensor compares an int64 with a Python float in float32 (16777217 > 16777216.0 was
    False) and with a float read in float64 (2**53 + 1 == 2.0**53 was True); Python
    compares exactly, in a test as in a value."""
    model = ComparesWithFloats()
    x = torch.ones(3, dtype=torch.float64)
    program = stitch.export(model, (x, torch.tensor(3), torch.tensor(2.0, dtype=torch.float64)))
    for k, f in ((16777217, 16777217.0), (2 ** 53 + 1, 2.0 ** 53), (-5, float("nan")),
                 (7, float("inf"))):
        args = (x, torch.tensor(k), torch.tensor(f, dtype=torch.float64))
        for got, want in zip(program(*args), model(*args), strict=True):
            torch.testing.assert_close(got, want, rtol=0, atol=0)


class Rounding(torch.nn.Module):
    def forward(self, x, n, v):
        k = n.item()
        f = v.item()
        if f > 1000:
            x = x * 2
        print("round", round(f, 1), round(k, -1), f % 1.0, int(f))
        return x * round(f, 2)


def test_rounding_to_digits_and_modulo_and_int_of_a_float_read_are_pythons(capfd):
    """``round(0.35, 1)`` is 0.3 in Python (0.35 is just below it; torch's multiply-and-
    round gave 0.4), ``round(15, -1)`` is 20 (it gave 15), ``-2.0 % 1.0`` is 0.0 (-0.0),
    and ``int(1e20)`` has no int64: the program refuses it loudly (it wrapped)."""
    model = Rounding()
    x = torch.ones(3, dtype=torch.float64)
    f64 = functools.partial(torch.tensor, dtype=torch.float64)
    program = stitch.export(model, (x, torch.tensor(30), f64(1.25)))
    for k, f in ((15, 0.35), (25, -2.0), (-15, 2.675), (7, -0.04)):
        capfd.readouterr()
        want = model(x, torch.tensor(k), f64(f))
        expected = capfd.readouterr().out
        got = program(x, torch.tensor(k), f64(f))
        assert capfd.readouterr().out == expected
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    with pytest.raises(SpecializationError, match="past int64"):
        program(x, torch.tensor(1), f64(1e20))


class ReadsGathered(torch.nn.Module):
    def forward(self, x, n, m):
        listed = [t.item() for t in (n, m)]
        appended = []
        for t in (n, m):
            appended.append(t.item())
        total = sum(t.item() for t in (n, m))
        if total > 100:
            x = x * 2
        return x * (listed[0] / listed[1]), x * (appended[0] / appended[1]), x * (1 / total)


def test_reads_gathered_by_a_comprehension_or_append_divide_as_python():
    model = ReadsGathered()
    x = torch.ones(3, dtype=torch.float64)
    program = stitch.export(model, (x, torch.tensor(6), torch.tensor(3)))
    for got, want in zip(program(x, torch.tensor(7), torch.tensor(3)),
                         model(x, torch.tensor(7), torch.tensor(3)), strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    _raises_as_model(program, model, x, torch.tensor(7), torch.tensor(0))
    _raises_as_model(program, model, x, torch.tensor(3), torch.tensor(-3))


class SafeDivision(torch.nn.Module):
    def forward(self, x, n, v):
        k = n.item()
        if k != 0:
            s = 10 / k
        else:
            s = 0.0
        f = v.item()
        if f >= 0:
            r = math.sqrt(f)
        else:
            r = 0.0
        return x * s, x * r


def test_a_branch_giving_a_read_or_a_constant_is_one_graph():
    """The arm no example ran gives a Python float where the other gives a read (a 0-d
    tensor): torch.cond returns no float, so the constant travels as a tensor of the read's
    kind. ``10 / 3`` is Python's double too (a tensor's
    reflected ``/`` multiplied by a reciprocal: one ulp off)."""
    model = SafeDivision()
    x = torch.ones(3, dtype=torch.float64)
    f64 = functools.partial(torch.tensor, dtype=torch.float64)
    program = stitch.export(model, (x, torch.tensor(4), f64(4.0)))
    for k, f in ((0, -1.0), (3, 2.0), (-7, 0.0)):
        for got, want in zip(program(x, torch.tensor(k), f64(f)),
                             model(x, torch.tensor(k), f64(f)), strict=True):
            torch.testing.assert_close(got, want, rtol=1e-15 if f == 2.0 else 0, atol=0)


class LargerOfReadAndTenth(torch.nn.Module):
    def forward(self, x, n):
        k = float(n.item())  # one kind: ``max(k, 0.1)`` of an int read is refused
        if k > 100:
            x = x * 2
        return x * max(k, 0.1)


def test_max_of_a_read_and_a_float_constant_keeps_the_double():
    """``max(0.0, 0.1)`` is the double 0.1; the constant was made a float32 tensor first
    (0.10000000149)."""
    model = LargerOfReadAndTenth()
    x = torch.ones(3, dtype=torch.float64)
    program = stitch.export(model, (x, torch.tensor(3)))
    _same(program, model, x, torch.tensor(0))


class TripleOrDecrement(torch.nn.Module):
    def forward(self, x, n):
        a = n.item()
        if a < 2 ** 60:
            s = 3 * a
        else:
            s = a - 1
        return x * (s % 7)


def test_a_product_with_a_constant_does_not_raise_in_the_arm_not_taken():
    """The branch is a torch.where and computes both arms: at ``a = 2**62`` the untaken
    ``3 * a`` wraps. The product is checked past int64 (also with the constant made a
    tensor before the check is chosen), and the check holds only in the arm taken
    (``arm_checks.py``)."""
    model = TripleOrDecrement()
    x = torch.ones(3, dtype=torch.float64)
    program = stitch.export(model, (x, torch.tensor(5)), examples=[
        ((x, torch.tensor(5)), {}), ((x, torch.tensor(2 ** 61)), {})])
    assert program.report.graph_ops.get("where", 0) >= 1, str(program.report)
    _same(program, model, x, torch.tensor(2 ** 62))


class LargerFlag(torch.nn.Module):
    def forward(self, x):
        a = (x.sum() > 0).item()
        if x.max() > 5:
            x = x * 2
        print("flag", max(a, False), min(a, True))
        return x


def test_max_of_bool_reads_is_a_bool(capfd):
    """``max(a, False)`` of a bool read is a bool, as in Python (it became an int: ``0``
    was printed, and verification refused the export)."""
    model = LargerFlag()
    program = stitch.export(model, (-torch.ones(3),))
    capfd.readouterr()
    model(torch.ones(3))
    expected = capfd.readouterr().out
    program(torch.ones(3))
    assert capfd.readouterr().out == expected == "flag True True\n"
