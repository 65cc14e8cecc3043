"""Examples as users give them: a first example of batch 1, and examples that pass different
optional keyword inputs. Both are one verified program that takes every example."""

from __future__ import annotations

import pytest
import torch

import stitch
from capture.inputs import Example
from stitch.errors import VerificationError


class Branchy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0:  # data-dependent: a cond in the program
            h = h * 2
        return h.relu()


def _exact(program, model, *inputs, **kwargs):
    for x in inputs:
        torch.testing.assert_close(program(x, **kwargs), model(x, **kwargs), rtol=0, atol=0)


def test_a_first_example_of_batch_one_gives_a_program_for_every_batch():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).eval()
    program = stitch.export(model, (torch.randn(1, 4),),
                            examples=[((torch.randn(2, 4),), {})])
    _exact(program, model, torch.randn(1, 4), torch.randn(2, 4), torch.randn(7, 4))
    assert any("traced from examples[0]" in n for n in program.report.notes)
    # the traced example is named as the user numbered it
    assert [c.what for c in program.report.checks][:2] == ["example 1", "example 0"]


def test_batch_one_first_with_a_data_dependent_branch():
    torch.manual_seed(1)
    model = Branchy().eval()
    program = stitch.export(model, (torch.randn(1, 4),),
                            examples=[((torch.randn(3, 4),), {}), ((-torch.ones(2, 4),), {})])
    assert program.report.graphs_after == 1
    _exact(program, model, torch.randn(1, 4), torch.ones(1, 4), -torch.ones(5, 4),
           torch.randn(6, 4))


def test_a_program_batch_one_cannot_share_is_refused_naming_the_users_example():
    class Broadcast(torch.nn.Module):
        def forward(self, x, y):
            return x + y

    with pytest.raises(VerificationError, match=r"^example 0: .*Guard failed"):
        stitch.export(Broadcast(), (torch.randn(1, 4), torch.randn(3, 4)),
                      examples=[((torch.randn(3, 4), torch.randn(3, 4)), {})])


class Areas(torch.nn.Module):
    """Tokens split into areas by a reshape of a transposed tensor (ultralytics' area
    attention, written small): traced at batch 2, torch's view computation guards that
    the batch is not 1, although the model computes alike there."""

    def forward(self, x):
        b, c, h, w = x.shape
        tokens = x.flatten(2).transpose(1, 2)
        areas = tokens.reshape(b * 4, h * w // 4, c).softmax(-1)
        return areas.reshape(b, h * w, c).transpose(1, 2).reshape(b, c, h, w) + x


def test_batch_one_is_served_where_torch_would_guard_its_own_ops_on_it():
    model = Areas()
    program = stitch.export(model, (torch.randn(1, 3, 4, 4),),
                            examples=[((torch.randn(2, 3, 4, 4),), {}),
                                      ((torch.randn(1, 3, 6, 6),), {})])
    _exact(program, model, torch.randn(1, 3, 4, 4), torch.randn(3, 3, 6, 6),
           torch.randn(1, 3, 8, 8))
    assert any(n.startswith("sizes reasoned about obliviously") for n in program.report.notes)
    # sizes 0 and 1 lie in the program's range here: they are verified all the same
    assert "example 0 cut to x.shape[0] == 0" in [c.what for c in program.report.checks] \
        or any("x.shape[0] == 0" in n for n in program.report.notes), program.report


def test_a_guard_batch_one_failed_in_any_strategy_sends_the_export_to_oblivious_sizes(
        monkeypatch):
    """The refusal raised is the converted strategy's (a break no rewrite takes, as in
    YOLO12's detection head), while the model as written failed only the batch-1 guard:
    the oblivious export is tried on what the strategies met, not on the last error."""
    from stitch import pipeline
    from stitch.errors import UnfixableBreaksError

    def unfixable(*args, **kwargs):
        raise UnfixableBreaksError("1 graph break(s) remain that stitch cannot rewrite")

    monkeypatch.setattr(pipeline, "rewrite_and_export", unfixable)
    model = Areas()
    program = stitch.export(model, (torch.randn(1, 3, 4, 4),),
                            examples=[((torch.randn(2, 3, 4, 4),), {}),
                                      ((torch.randn(1, 3, 6, 6),), {})])
    _exact(program, model, torch.randn(1, 3, 4, 4), torch.randn(3, 3, 6, 6))
    assert any(n.startswith("sizes reasoned about obliviously") for n in program.report.notes)


def test_only_a_guard_failed_on_an_example_of_size_one_asks_for_oblivious_sizes():
    """A guard only a larger example fails (a window partition's view) says nothing of
    batch 1: no second export under oblivious sizes for it; one the batch-1 example fails
    does, wherever among the refusals the strategies met it is."""
    from stitch.errors import UnfixableBreaksError
    from stitch.example_shapes import small_sizes
    from stitch.pipeline import _small_size_guard

    model = torch.nn.Linear(4, 4)
    inputs = [Example((torch.randn(2, 4),), {}, number=1),
              Example((torch.randn(1, 4),), {}, number=0),
              Example((torch.randn(3, 4),), {})]
    small = small_sizes(model, inputs, {"input": {0: torch.export.Dim.AUTO}})
    assert small == {"example 0"}

    def guard_failed(name: str) -> VerificationError:
        return VerificationError(f"{name}: the model returned normally but the stitched "
                                 "program raised AssertionError: Guard failed: x > 2",
                                 AssertionError("Guard failed: x.size()[0] != 1"))

    other = guard_failed("example 2")
    assert _small_size_guard(other, small) is None
    refusal = UnfixableBreaksError("1 graph break(s) remain")
    refusal.met = (other, guard_failed("example 0"))
    assert str(_small_size_guard(refusal, small)).startswith("example 0:")


def test_examples_that_need_no_oblivious_sizes_are_exported_as_torch_makes_them():
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).eval()
    program = stitch.export(model, (torch.randn(1, 4),), examples=[((torch.randn(3, 4),), {})])
    assert not any("obliviously" in n for n in program.report.notes)


class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x, conditioning_scale: float = 1.0, mask=None):
        h = self.lin(x) * conditioning_scale
        return h if mask is None else h * mask


def test_examples_passing_different_keywords_share_one_signature():
    torch.manual_seed(2)
    model = Scaled().eval()
    program = stitch.export(model, (torch.randn(2, 4),),
                            examples=[((torch.randn(3, 4),), {"conditioning_scale": 1.0})])
    x = torch.randn(5, 4)
    # a call that leaves the keyword out means its default, as for the model
    torch.testing.assert_close(program(x), model(x), rtol=0, atol=0)
    torch.testing.assert_close(program(x, conditioning_scale=1.0), model(x), rtol=0, atol=0)


def test_a_keyword_one_program_cannot_take_both_ways_is_refused_by_name():
    model = Scaled().eval()
    with pytest.raises(VerificationError, match="input 'mask'.*exported with mask=None"):
        stitch.export(model, (torch.randn(2, 4),),
                      examples=[((torch.randn(3, 4),), {"mask": torch.ones(3, 4)})])


def test_an_input_one_program_cannot_take_both_ways_is_named_first_where_numbers_differ_too():
    """The examples differ in a number (made a run-time input) and in an input that is None
    in one and a tensor in the other: the refusal names the input no program takes both
    ways, not the number."""
    model = Scaled().eval()
    with pytest.raises(VerificationError) as caught:
        stitch.export(model, (torch.randn(2, 4),), {"conditioning_scale": 2.0},
                      examples=[((torch.randn(3, 4),), {"mask": torch.ones(3, 4)})])
    text = str(caught.value)
    assert text.startswith("example 1:") and "input 'mask'" in text, text
    assert "exported with mask=None" in text and "Python numbers differ" not in text, text
