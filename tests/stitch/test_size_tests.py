"""A test on an input's size that torch.export decided for the examples' sizes (``if
x.shape[0] > 4:`` with the dimension exported dynamic) becomes a cond on the size
(capture/size_tests.py, stitch/size_rewrite.py): the program serves the sizes taking the
other side, which the model accepts, instead of raising 'Guard failed' there."""

from __future__ import annotations

import logging

import pytest
import torch

import stitch


class CutsLongInputs(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] > 4:  # both examples have more than 4 rows
            x = x[:4]  # in this arm only: no guard on the inputs for the slice
        if x.sum() > 0:
            return x * 2
        return x - 1


def averages_wide(h, limit):
    if h.shape[-1] > limit:  # in a helper, not the forward
        h = h.mean(-1, keepdim=True)
    return h


class WideInHelper(torch.nn.Module):
    def forward(self, x):
        return averages_wide(x, 5) + 1


class CountsWithLen(torch.nn.Module):
    def forward(self, x):
        if len(x) >= 6:  # len() must give an int: torch.export made the size a constant
            return x.cumsum(0)
        return x


def _served(model, program, shapes):
    for shape in shapes:
        for sign in (1, -1):
            x = sign * torch.rand(*shape)
            torch.testing.assert_close(program(x), model(x))


def test_a_size_test_becomes_a_cond_and_the_general_side_is_served():
    model = CutsLongInputs()
    program = stitch.export(model, (torch.rand(6, 2),), examples=[((-torch.rand(8, 2),), {})])
    assert not program.exported_program._guards_code  # no check on the inputs' sizes is left
    notes = [n for n in program.report.notes if "rewritten as torch.cond on the size" in n]
    assert len(notes) == 1 and "x.shape[0]: 2-4" in notes[0], program.report.notes
    assert not [n for n in program.report.notes if n.startswith("SIZE GUARDS")]
    # the other side was verified on an input of that size, not only on the examples
    assert "example 0 cut to x.shape[0] == 4" in [c.what for c in program.report.checks]
    _served(model, program, [(2, 2), (3, 2), (4, 2), (5, 2), (9, 2)])
    # one row: the cond's output size is checked to be at least 2 (torch.export's range);
    # the program raises there, and the report says so
    assert any("x.shape[0] == 1" in n and "refused by the program" in n
               for n in program.report.notes), program.report.notes


def test_a_size_test_in_a_helper_becomes_a_cond():
    model = WideInHelper()
    program = stitch.export(model, (torch.rand(2, 6),), examples=[((torch.rand(3, 8),), {})])
    assert not program.exported_program._guards_code
    _served(model, program, [(2, 2), (2, 5), (3, 9)])


def test_a_size_test_through_len_is_served_on_every_size():
    """``len(x)`` made the size a constant (the program raised on example 1, and stitch
    refused the model); read as the symbolic size, the test is a cond like any other."""
    model = CountsWithLen()
    program = stitch.export(model, (torch.rand(6, 3),), examples=[((torch.rand(8, 3),), {})])
    assert not program.exported_program._guards_code
    _served(model, program, [(2, 3), (5, 3), (6, 3), (9, 3)])


def test_the_users_own_dynamic_shapes_are_served_as_given():
    """A Dim the user passes says which sizes the program serves: no rewrite."""
    batch = torch.export.Dim("batch", min=5)
    program = stitch.export(CutsLongInputs(), (torch.rand(6, 2),),
                            examples=[((-torch.rand(8, 2),), {})],
                            dynamic_shapes=({0: batch},))
    assert not [n for n in program.report.notes if "on the size" in n]
    with pytest.raises(Exception, match="Guard failed|range|constraint"):
        program(torch.rand(3, 2))


class TwoThresholds(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] > 4:
            return x * 2
        if x.shape[0] >= 3:  # in the false arm of the cond the first test becomes
            return x + 5
        return x.flip(0) + 5


class SizeTestInADataBranch(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            if x.shape[0] >= 3:  # a size test in the arm of a data-dependent cond
                return x * 2
            return x.flip(0) * 2
        return x - 1


def _never_silent(model, program, sizes, reference=None):
    """Each size: the program's result is the model's (``reference``'s, where given), or the
    program raises."""
    raised = []
    for n in sizes:
        for sign in (1, -1):
            x = sign * torch.rand(n, 3)
            try:
                got = program(x)
            except Exception:  # noqa: BLE001 - loud: allowed
                raised.append(n)
                continue
            torch.testing.assert_close(got, (reference or model)(x))
    return sorted(set(raised))


def _rewritten_at(program, line_text):
    return [n for n in program.report.notes
            if "rewritten as torch.cond on the size" in n and line_text in n]


def test_a_size_test_inside_a_cond_arm_becomes_a_cond_of_its_own():
    """torch.cond's arms are traced by Dynamo inside torch.export, on symbols of its own;
    its check of the arm's guards against the inputs puts ``x.shape[0] >= 3`` on the
    program's size from a frame that names no user line (rt_lift._checked,
    size_tests.carry_guard_lines carries the line over). Without the check the test would
    be decided silently (2 rows would get ``x + 5``); without the rewrite the program would
    raise at 2 rows."""
    model = TwoThresholds()
    program = stitch.export(model, (torch.rand(6, 3),), examples=[((torch.rand(8, 3),), {})])
    assert _never_silent(model, program, range(0, 10)) == []
    assert _rewritten_at(program, "`if x.shape[0] >= 3:")
    assert not program.exported_program._guards_code


def test_a_size_test_in_a_data_branch_becomes_a_cond_of_its_own():
    model = SizeTestInADataBranch()
    program = stitch.export(model, (torch.rand(6, 3),), examples=[((-torch.rand(8, 3),), {})])
    assert _never_silent(model, program, range(0, 10)) == []
    assert _rewritten_at(program, "`if x.shape[0] >= 3:")


class TwoDataBranchesDeep(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            if x.mean() > 5:  # no example takes this side: it is forced
                if x.shape[0] > 4:  # torch writes the guard `>= 5`, Dynamo's trace `> 4`
                    return x * 2
                return x.flip(0) * 3
            return x + 1
        return x - 1


def test_a_size_test_two_data_branches_deep_becomes_a_cond():
    model = TwoDataBranchesDeep()
    program = stitch.export(model, (torch.rand(6, 3),), examples=[((-torch.rand(8, 3),), {})])
    assert _rewritten_at(program, "`if x.shape[0] > 4:")
    for scale in (1, -1, 10):
        assert _never_silent(model, lambda x, s=scale: program(x * s),
                             range(0, 10), lambda x, s=scale: model(x * s)) == []


class RowsSharedWithAnother(torch.nn.Module):
    def forward(self, x, y):
        if x.sum() > 0:
            if y.shape[0] >= 3:  # the cat ties y's rows to x's: torch writes the guard on x
                return torch.cat([x, y], 1)
            return torch.cat([x.flip(0), y], 1)
        return x[:, :2] - y


def test_a_size_test_on_rows_two_inputs_share_becomes_a_cond():
    model = RowsSharedWithAnother()

    def pair(n, sign):
        return sign * torch.rand(n, 3), torch.rand(n, 2)

    program = stitch.export(model, pair(6, 1), examples=[(pair(8, -1), {})])
    assert _rewritten_at(program, "`if y.shape[0] >= 3:")
    for n in range(0, 10):
        for sign in (1, -1):
            x, y = pair(n, sign)
            torch.testing.assert_close(program(x, y), model(x, y))


class SizeTestBesideACount(torch.nn.Module):
    def forward(self, x):
        k = x[x[:, 0] > 0].shape[0]  # a count known only at run time (unbacked)
        if x.sum() > 0:  # the cond's arms read k through their closure
            if x.shape[0] >= 6:
                return x * 2 + k
            return x - k
        return x + 1


def test_a_size_test_beside_a_count_known_at_run_time_becomes_a_cond():
    """An arm that reads an unbacked count through its closure is traced with torch's flag
    for tracing that is not strict, under which Dynamo skips checking its guards against
    the inputs: ``x.shape[0] >= 6`` would be decided for the examples' sizes and 2 to 5 rows
    would get ``x * 2 + k`` silently. The check is made under the flag too, and the test
    becomes a cond."""
    model = SizeTestBesideACount()
    program = stitch.export(model, (torch.rand(7, 3) + 0.1,),
                            examples=[((torch.rand(9, 3) + 0.1,), {})])
    assert _never_silent(model, program, range(0, 12)) == []
    assert _rewritten_at(program, "`if x.shape[0] >= 6:")


class BySizeCall(torch.nn.Module):
    def forward(self, x):
        if x.size(0) > 4:  # the size as a call, not an attribute
            return x * 2
        return x - 1


class ByNumel(torch.nn.Module):
    def forward(self, x):
        if x.numel() > 15:  # a product of sizes
            return x.cumsum(0)
        return x + 1


class ThroughAFlag(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.limit = 4  # the threshold an attribute, the test bound to a name first

    def forward(self, x):
        wide = x.shape[0] > self.limit
        if wide:
            return x * 2
        return x - 1


class NumelInAnArm(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            if x.numel() >= 9:  # Dynamo's trace `3*s >= 9`, torch's guard `s >= 3`
                return x * 2
            return x.flip(0)
        return x - 1


class UnpackedBeforeTheBranch(torch.nn.Module):
    def forward(self, x):
        n, _ = x.shape  # a size read before the branch: the arm reads it as an int
        if x.sum() > 0:
            if n >= 3:
                return x * 2
            return x.flip(0)
        return x - 1


class ComputedBeforeTheBranch(torch.nn.Module):
    def forward(self, x):
        n = x.shape[0] * 2 + 1
        if x.sum() > 0:
            if n > 7:
                return x * 2
            return x.flip(0)
        return x - 1


@pytest.mark.parametrize("model_type", [NumelInAnArm, UnpackedBeforeTheBranch,
                                        ComputedBeforeTheBranch])
def test_a_size_test_in_an_arm_written_otherwise_becomes_a_cond(model_type):
    model = model_type()
    program = stitch.export(model, (torch.rand(6, 3),), examples=[((-torch.rand(8, 3),), {})])
    assert not program.exported_program._guards_code, program.report.notes
    assert _never_silent(model, program, range(0, 10)) == []


@pytest.mark.parametrize("model_type", [BySizeCall, ByNumel, ThroughAFlag])
def test_a_size_test_written_otherwise_becomes_a_cond(model_type):
    model = model_type()
    program = stitch.export(model, (torch.rand(6, 3),), examples=[((torch.rand(8, 3),), {})])
    assert not program.exported_program._guards_code, program.report.notes
    _served(model, program, [(2, 3), (4, 3), (5, 3), (9, 3)])


class LenBelowInAnArm(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            if len(x) < 4:
                return x * 2
            return x.flip(0)
        return x - 1


class UnequalInAnArm(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            if x.shape[0] != 3:  # Dynamo's `Ne(s, 3)`: no >= form
                y = x * 2
            else:
                y = x.flip(0)
        else:
            y = x - 1
        return y


class NumelEqualInAnArm(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            if x.numel() == 9:  # `Ne(3*s, 9)` on 3 columns
                return x.flip(0)
            return x * 2
        return x - 1


@pytest.mark.parametrize("model_type", [LenBelowInAnArm, UnequalInAnArm, NumelEqualInAnArm])
def test_a_len_or_equality_size_test_in_an_arm_is_served_on_every_size(model_type):
    """No guard is left (it would raise on 0-3 or 3 rows): every size is served."""
    model = model_type()
    program = stitch.export(model, (torch.rand(6, 3),), examples=[((-torch.rand(8, 3),), {})])
    assert not program.exported_program._guards_code, program.report.notes
    assert _never_silent(model, program, range(0, 10)) == []


class KeepsAnAttributeBySize(torch.nn.Module):
    def forward(self, x):
        h = x * 1.5
        # an attribute target: the conditional expression stays one (a cond over two thunks)
        self.h = h * 2.0 if h.shape[1] % 8 else h - 1.0
        return h + self.h


def test_a_conditional_expression_on_a_size_into_an_attribute_is_a_cond():
    model = KeepsAnAttributeBySize()
    program = stitch.export(model, (torch.rand(4, 8),), examples=[((torch.rand(5, 16),), {})])
    assert not program.exported_program._guards_code
    for shape in [(3, 8), (4, 12), (2, 5)]:
        x = torch.rand(*shape)
        got = program(x)
        set_by_program = model.h  # the epilogue sets it on the model after each call
        torch.testing.assert_close(got, model(x))
        torch.testing.assert_close(set_by_program, model.h)


LOG = logging.getLogger("tests.size_tests")


def scaled_until_ragged(h):
    items = [h, h]
    for _ in range(3):
        h = h * 0.9
        if h.shape[1] % 8:  # example 1 breaks, example 0 does not
            LOG.warning("ragged: %.3f", h.sum().item())  # a call before the break
            items = [h * 2.0, h + 1.0]
            break
        items = [h - 1.0, h * 0.5]
    return items[0] + items[1]


class BreaksOnASize(torch.nn.Module):
    def forward(self, x):
        return scaled_until_ragged(x * 1.5)


def test_a_break_on_a_size_with_a_call_before_it_is_served_on_every_size(caplog):
    """The census of the rewritten model runs the size test's side in Python (Dynamo holds
    the size concrete): the call before the ``break`` is no new break in the loop."""
    model = BreaksOnASize()
    program = stitch.export(model, (torch.rand(4, 8),), examples=[((torch.rand(4, 12),), {})])
    assert not program.exported_program._guards_code
    for shape in [(4, 16), (4, 5), (4, 20)]:  # both examples have 4 rows: a static size
        x = torch.rand(*shape)
        caplog.clear()
        got = program(x)
        logged = [r.getMessage() for r in caplog.records]
        caplog.clear()
        torch.testing.assert_close(got, model(x))
        assert logged == [r.getMessage() for r in caplog.records]
