"""Size tests torch.export decides that need more than one ``if`` rewritten
(stitch/size_rewrite.py, capture/size_tests.py).

Tests found in one trace are rewritten together; where that export fails and its error names
none of them (a break inside a rewritten test's arm: kornia's non-maxima suppression, whose
window test's arm Dynamo cannot trace as a cond), each is left out in turn and the first set
that exports serves; the test left out keeps torch.export's guard, and the report says so.
A truth of sizes assigned to a name (``padding = pad_b > 0 or pad_r > 0``, ``any(...)`` of a
generator, ``not``/``bool()`` of one, ``pad_b or pad_r`` of ints) stays symbolic, and the
``if`` that reads it is a size test of its own."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import stitch
import stitch.size_rewrite as size_rewrite
from stitch.errors import ExportFailedError


class ShrinksByAFactor(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] > 4:  # both examples take this side: its guard serves them
            x = x * 2
        n = int(float(x.shape[-1]) / 1.5)  # float() of a size fixed it: the second example fails
        return F.interpolate(x[None], size=n, mode="linear")[0]


@pytest.fixture
def branch_rewrite_fails(monkeypatch):
    """The rewrite of the ``if`` fails to export, with an error that names no line."""
    real = size_rewrite.widened

    def widened(exported, again, *args, **kwargs):
        def failing(sites, left_out, **options):
            if any("if x.shape[0] > 4" in s.source_line for s in sites):
                raise ExportFailedError("a break in an arm of the rewritten test")
            return again(sites, left_out, **options)
        return real(exported, failing, *args, **kwargs)

    monkeypatch.setattr(size_rewrite, "widened", widened)
    import stitch.rewrite_export as rewrite_export
    monkeypatch.setattr(rewrite_export, "widened", widened)


def test_the_size_tests_that_export_are_served_when_another_ones_rewrite_fails(
        branch_rewrite_fails):
    model = ShrinksByAFactor()
    first, second = torch.randn(6, 12), torch.randn(8, 18)
    program = stitch.export(model, (first,), examples=[((second,), {})])
    for x in (first, second, torch.randn(7, 30)):
        torch.testing.assert_close(program(x), model(x))
    left = [n for n in program.report.notes if "its rewrite failed to export" in n]
    assert len(left) == 1 and "if x.shape[0] > 4:" in left[0], program.report.notes


class PadsToAMultiple(torch.nn.Module):
    def forward(self, x):
        pad_a = (-x.shape[0]) % 4
        pad_b = (-x.shape[1]) % 4
        padding = pad_a > 0 or pad_b > 0  # a truth of sizes, kept symbolic
        if padding:  # then the test torch.export decides: a cond of its own
            x = F.pad(x, (0, pad_b, 0, pad_a))
        return x.reshape(-1, 4).sum(0)


def _served(model):
    """The program of ``model`` exported from two sizes, checked on sizes on both sides."""
    program = stitch.export(model, (torch.randn(8, 8),), examples=[((torch.randn(6, 10),), {})])
    for shape in [(8, 8), (6, 10), (5, 7), (12, 4), (3, 3)]:
        x = torch.randn(*shape)
        torch.testing.assert_close(program(x), model(x))
    return program


def _pads(x):
    return [(-x.shape[0]) % 4, (-x.shape[1]) % 4]


class AnyPads(torch.nn.Module):
    def forward(self, x):
        pads = _pads(x)
        padding = any(p > 0 for p in pads)
        if padding:
            x = F.pad(x, (0, pads[1], 0, pads[0]))
        return x.reshape(-1, 4).sum(0)


class PadsTestedInAHelper(torch.nn.Module):
    def needs_padding(self, pads):
        return any(p > 0 for p in pads)  # returned, then tested by the caller

    def forward(self, x):
        pads = _pads(x)
        if self.needs_padding(pads):
            x = F.pad(x, (0, pads[1], 0, pads[0]))
        return x.reshape(-1, 4).sum(0)


class NotAllPadsZero(torch.nn.Module):
    def forward(self, x):
        pads = _pads(x)
        padding = not all(p == 0 for p in pads)
        if padding:
            x = F.pad(x, (0, pads[1], 0, pads[0]))
        return x.reshape(-1, 4).sum(0)


class EitherPad(torch.nn.Module):
    def forward(self, x):
        pad_a, pad_b = _pads(x)
        padding = pad_a or pad_b  # an int, not a truth: Python's value kept
        if padding:
            x = F.pad(x, (0, pad_b, 0, pad_a))
        return x.reshape(-1, 4).sum(0)


class TruthOfEither(torch.nn.Module):
    def forward(self, x):
        pad_a, pad_b = _pads(x)
        padding = bool(pad_a or pad_b)
        if padding:
            x = F.pad(x, (0, pad_b, 0, pad_a))
        return x.reshape(-1, 4).sum(0)


class PaddedOrForced(torch.nn.Module):
    force = False  # a Python bool beside a truth of sizes

    def forward(self, x):
        pad_a, pad_b = _pads(x)
        is_padded = pad_a > 0 or pad_b > 0
        padding = is_padded or self.force
        if padding:
            x = F.pad(x, (0, pad_b, 0, pad_a))
        return x.reshape(-1, 4).sum(0)


class WidthWherePadded(torch.nn.Module):
    def forward(self, x):
        pad_a = (-x.shape[0]) % 4
        n = pad_a and x.shape[1]  # a value: 0, or the width
        return F.pad(x, (0, n)).sum(0)


@pytest.mark.parametrize("model", [PadsToAMultiple, AnyPads, PadsTestedInAHelper,
                                   NotAllPadsZero, EitherPad,
                                   TruthOfEither, PaddedOrForced, WidthWherePadded],
                         ids=lambda m: m.__name__)
def test_each_spelling_of_a_truth_of_sizes_is_served_on_every_size(model):
    """timm's window attention: ``padding = pad_b > 0 or pad_r > 0`` then ``if padding:``.
    Python's ``or`` decided the sizes where it was written. It and ``any``/``all`` of a
    generator, ``not`` of one, ``or``/``and`` of ints (Python's value, an operand, not its
    truth) and ``bool()`` of one are each kept symbolic where assigned, and the ``if``
    reading it becomes a cond: no guard is left."""
    assert not _served(model()).exported_program._guards_code


class PadOrFour(torch.nn.Module):
    def forward(self, x):
        pad_a = (-x.shape[0]) % 4
        n = pad_a or 4  # a size or a Python int: selected arithmetically (sym_ite takes one type)
        return F.pad(x, (0, 0, 0, n)).sum(0)


def test_a_size_or_a_python_int_is_served_on_both_sides():
    _served(PadOrFour())


def test_a_pass_over_size_tests_takes_no_census_where_its_export_succeeds(monkeypatch):
    """Export cost: each pass over size tests goes on from the rounds the pass before ended
    and is traced by its own torch.export first; a Dynamo census of the rewritten model
    (the largest part of an export's time) is taken only where that export fails."""
    import stitch.synthesize.convert.rounds as rounds

    censuses = []
    real = rounds.round_census
    monkeypatch.setattr(rounds, "round_census",
                        lambda *a, **k: censuses.append(1) or real(*a, **k))
    assert not _served(PadsToAMultiple()).exported_program._guards_code
    assert not censuses


class PrintsWherePadded(torch.nn.Module):
    def forward(self, x):
        pad = (-x.shape[0]) % 4
        if pad > 0:  # neither example pads: the arm and its print run for no example
            print(f"padding {pad} rows")
            x = F.pad(x, (0, 0, 0, pad))
        return x.reshape(-1, 4).sum(0)


def test_a_size_test_whose_arm_prints_replays_the_print_on_the_sizes_taking_it(capsys):
    """The pass over it is traced by torch.export alone (no census): the print in the arm is
    deferred by what the rewrite reads in the source, and replayed where the arm runs."""
    model = PrintsWherePadded()
    program = stitch.export(model, (torch.randn(8, 8),), examples=[((torch.randn(12, 8),), {})])
    capsys.readouterr()
    for rows in (8, 5, 7):
        x = torch.randn(rows, 8)
        got = program(x)
        printed = capsys.readouterr().out
        torch.testing.assert_close(got, model(x))
        assert printed == capsys.readouterr().out == ("" if rows == 8 else
                                                      f"padding {-rows % 4} rows\n")
    assert not program.exported_program._guards_code


class PadsThenChunks(torch.nn.Module):
    """Longformer's shape: a padding test, then an assert on the padded length. Rewritten
    into a cond, the padding makes the length data (its arms differ in size), and the
    assert cannot be decided on it; without the padding test, the assert and the test after
    it are tests on sizes torch.export decided, rewritten in a pass of their own."""

    def chunks(self, x):
        n = x.shape[1]
        assert n % 8 == 0, "not padded"
        return x.view(x.shape[0], n // 8, 8, x.shape[2]).sum(2)

    def forward(self, x):
        pad = (8 - x.shape[1] % 8) % 8
        if pad > 0:
            x = F.pad(x, (0, 0, 0, pad))
        y = self.chunks(x)
        if y.shape[1] > 2:
            y = y * 2
        return y


def test_a_size_test_whose_rewrite_failed_is_not_tried_again_in_a_later_pass(monkeypatch):
    """The pass over the tests that export without the padding test finds the padding test
    a guard again; it stays one there too, with no second census pass to show it fails;
    and the census pass that failed is not taken again from the first round. The padding
    test is then served by its padding arm at every length (one arm, test_one_arm.py)."""
    import stitch.synthesize.convert.rounds as rounds

    censuses = []
    real = rounds.round_census
    monkeypatch.setattr(rounds, "round_census",
                        lambda *a, **k: censuses.append(1) or real(*a, **k))
    model = PadsThenChunks()
    program = stitch.export(model, (torch.randn(2, 32, 4),),
                            examples=[((torch.randn(2, 24, 4),), {})])
    # one census: the pass over all three tests, resumed from the first pass's rounds. Its
    # refusal keeps the program before it, so it is not taken again from the first round
    # (2 censuses), and the pass nested in the leave-one-out try does not try the padding
    # test again (4)
    assert len(censuses) == 1, len(censuses)
    notes = program.report.notes
    left = [n for n in notes if "if pad > 0:" in n]
    assert len(left) == 1 and "the arm most sizes take runs at every size" in left[0], notes
    for length in (9, 13, 16, 20, 21, 40, 64):  # both sides of both tests on sizes
        x = torch.randn(2, length, 4)
        torch.testing.assert_close(program(x), model(x))
