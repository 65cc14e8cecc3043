"""A scalar read passed to a helper keeps Python's number rules inside it
(``number_helpers.py``, ``helper_rewrites.py``).

With tensor operators in the helper, ``k / 3`` there would be a float32 quotient
(2.3333332538604736 where the model has 2.3333333333333335, inside verification's
tolerance, so a wrong export would be returned), and the helper's result would keep the
tensor's rules in the caller."""

from __future__ import annotations

import number_helper_utils
import pytest
import torch

import stitch


def third(k):
    return k / 3


def floor_half(k):
    return inner_floor(k, 2)


def inner_floor(a, b):
    return a // b


def spread(x, k):  # called with a tensor first, then with a read
    return x / 3 + k / 7


class ModuleHelper(torch.nn.Module):
    def forward(self, x, n):
        k = n.item()
        if k > 100:
            x = x * 2
        return x * third(k)


class MethodHelper(torch.nn.Module):
    def share(self, total, parts):
        return 10 // parts + total / parts

    @staticmethod
    def decrement(k):
        return k - 1

    def forward(self, x, n):
        k = n.item()
        if k > 100:
            x = x * 2
        return x * self.share(7, parts=self.decrement(k))


class ResultAsRead(torch.nn.Module):
    def forward(self, x, n):
        k = n.item()
        if k > 100:
            x = x * 2
        h = floor_half(k)
        print("half", h, "ratio", h / 3)
        return x * (h / 3)


class MixedCallers(torch.nn.Module):
    def forward(self, x, n):
        k = n.item()
        if k > 100:
            x = x * 2
        return spread(x, k) + spread(torch.ones_like(x), 5)


def _export(model, *rows):
    x = torch.full((3,), 1.5, dtype=torch.float64)
    first = (x, torch.tensor(rows[0]))
    program = stitch.export(model, first, examples=[((x, torch.tensor(k)), {})
                                                    for k in rows])
    return program, x


def _exact(program, model, *args):
    torch.testing.assert_close(program(*args), model(*args), rtol=0, atol=0)


def test_a_module_level_helper_divides_as_python():
    model = ModuleHelper()
    program, x = _export(model, 7, 700)
    for k in (7, 1, -10, 1000, 2 ** 40 + 1):
        _exact(program, model, x, torch.tensor(k))
    assert third(7) == 7 / 3  # the user's function is the user's again


def test_a_method_and_a_staticmethod_keep_python_numbers():
    model = MethodHelper()
    program, x = _export(model, 7, 700)
    for k in (7, 2, 3, -5, 1000):
        _exact(program, model, x, torch.tensor(k))
    with pytest.raises(ZeroDivisionError):  # 10 // 0 in the helper, as in the model
        model(x, torch.tensor(1))
    with pytest.raises(ZeroDivisionError):
        program(x, torch.tensor(1))


def test_a_helpers_result_is_a_read_in_the_caller(capfd):
    model = ResultAsRead()
    program, x = _export(model, 7, 700)
    for k in (7, 9, -3, 1000):
        _exact(program, model, x, torch.tensor(k))
    capfd.readouterr()
    model(x, torch.tensor(9))
    expected = capfd.readouterr().out
    program(x, torch.tensor(9))
    assert capfd.readouterr().out == expected == "half 4 ratio 1.3333333333333333\n"


def test_a_helper_called_with_a_tensor_keeps_the_tensor_rules():
    model = MixedCallers()
    program, x = _export(model, 7, 700)
    for k in (7, 3, 1000):
        _exact(program, model, x, torch.tensor(k))
    assert program(x, torch.tensor(3)).dtype == torch.float64


def reciprocal(k):
    return 1 / k


def div(a, b):  # named as a pure elementwise call the where rule knows (``div``)
    return a / b


class ReciprocalInArm(torch.nn.Module):
    def forward(self, x, n):
        k = n.item()
        if k != 0:
            y = x * div(1, k)
        else:
            y = x
        return y


def test_a_helper_in_an_arm_runs_only_where_the_arm_is_taken():
    """The helper's ``1 / k`` raises ``ZeroDivisionError`` at 0, as Python's does; a
    torch.where would run the arm on every input, so the branch is a torch.cond (the
    where rule counts a helper a read reaches as one that may raise, whatever its name:
    ``div`` is also a pure call the rule would otherwise predicate)."""
    model = ReciprocalInArm()
    program, x = _export(model, 4, -2)
    assert program.report.graph_ops.get("cond", 0) >= 1, str(program.report)
    for k in (0, 4, 3, -7):
        _exact(program, model, x, torch.tensor(k))


class ReciprocalAfterAnd(torch.nn.Module):
    def forward(self, x, n):
        k = n.item()
        if k != 0 and reciprocal(k) > 0.2:
            x = x * 2
        return x


def test_a_helper_after_and_is_computed_only_where_python_computes_it():
    """``and`` computes its later operand on every input unless that operand may raise
    (then under a torch.cond); a helper a read reaches counts as one that may."""
    model = ReciprocalAfterAnd()
    program, x = _export(model, 4, 2)
    for k in (0, 4, 2, 3, -7):
        _exact(program, model, x, torch.tensor(k))


def plus_one(k):
    return k + 1


class PrintedBound(torch.nn.Module):
    """The as-written fallback model of ``test_as_written.py``: with tensor operators the
    helper's ``k + 1`` would be a tensor, printed as one, and the rewrite refused."""

    def forward(self, x):
        n = plus_one(x[0].argmax().item())
        print("keeping", n, "columns")
        return x[:, :n] * 2


def test_a_read_through_a_helper_prints_as_the_number_it_is(capfd):
    x = torch.arange(16.0).reshape(2, 8)
    program = stitch.export(PrintedBound(), (x,), examples=[((x.flip(1),), {})])
    actions = {d.action for d in program.report.decisions}
    assert stitch.plan.Action.AS_WRITTEN not in actions, str(program.report)
    for inp, columns in ((x, 8), (x.flip(1), 1)):
        capfd.readouterr()
        got = program(inp)
        assert capfd.readouterr().out == f"keeping {columns} columns\n"
        torch.testing.assert_close(got, PrintedBound()(inp))


class MeanOfReads(torch.nn.Module):
    def forward(self, x, n, m):
        k, j = n.item(), m.item()
        if k > 100:
            x = x * 2
        return x * number_helper_utils.mean_of([k, j, 1])


def test_a_list_of_reads_reaches_a_user_modules_function():
    """Another spelling: the helper is a user module's attribute, and the reads reach it
    inside a list (``sum`` of ints, then ``/`` of ints: exact in Python, float32 as
    tensors)."""
    model = MeanOfReads()
    x = torch.full((3,), 1.5, dtype=torch.float64)
    args = (x, torch.tensor(7), torch.tensor(2))
    program = stitch.export(model, args, examples=[(args, {}), (
        (x, torch.tensor(700), torch.tensor(3)), {})])
    for k, j in ((7, 2), (1, 0), (-5, 3), (1000, 11)):
        _exact(program, model, x, torch.tensor(k), torch.tensor(j))
