"""A data-dependent guard (`if <tensor>: raise`, `assert`) becomes a runtime check that
raises what the model raises: its exception class (also the model's own), its message —
computed ones made when traced, from static values —, no stitch marker as its cause. A
message formatting a value known only at run time is the message's source text (the type is
the model's). What a check cannot give is refused: `raise ... from`, a guard a `try` may
catch, an exception taking several arguments."""

from __future__ import annotations

import pytest
import torch
import torch as th
from torch import _assert, nn

import stitch


class MaskError(Exception):
    pass


class NotGuard(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.name = "encoder.layer3"

    def forward(self, x, mask):
        if not mask.all():
            raise ValueError("bad mask in " + self.name)
        assert not torch.isnan(x).any(), f"NaN in a batch of {x.shape[0]}"
        return x * 2


class OwnException(nn.Module):
    def forward(self, x, mask):
        if (~mask).any():
            raise MaskError("bad mask")
        return x * 2


class DataMessage(nn.Module):
    def forward(self, x, mask):
        if (~mask).any():
            raise ValueError(f"bad mask, max {x.max()}")
        return x * 2


class CaughtGuard(nn.Module):
    def forward(self, x, mask):
        try:
            if (~mask).any():
                raise ValueError("bad mask")
        except ValueError:
            return x
        return x * 2


class ChainedGuard(nn.Module):
    def forward(self, x, mask):
        if (~mask).any():
            raise ValueError("bad mask") from KeyError("upstream")
        return x * 2


class TwoArguments(nn.Module):
    def forward(self, x, mask):
        if (~mask).any():
            raise ValueError("bad mask", 42)
        return x * 2


X = torch.ones(3)
OK, BAD = torch.tensor([True, True, True]), torch.tensor([True, False, True])


def _raised(fn, *args) -> BaseException:
    with pytest.raises(Exception) as caught:
        fn(*args)
    return caught.value


@pytest.mark.parametrize("model, bad", [
    (NotGuard(), (X, BAD)), (NotGuard(), (X * float("nan"), OK)), (OwnException(), (X, BAD))])
def test_a_check_raises_what_the_model_raises(model, bad):
    program = stitch.export(model, (X, OK), examples=[((X * 2, OK), {})])
    torch.testing.assert_close(program(X * 3, OK), model(X * 3, OK))
    want, got = _raised(model, *bad), _raised(program, *bad)
    # (pytest rewrites this file's asserts: eager's message gains its explanation lines)
    assert (type(got), str(got)) == (type(want), str(want).split("\nassert ")[0])
    assert got.__cause__ is None and "[stitch:" not in str(got)


def test_a_message_formatting_data_is_its_source_text():
    program = stitch.export(DataMessage(), (X, OK), examples=[((X * 2, OK), {})])
    got = _raised(program, X, BAD)
    assert type(got) is ValueError and str(got) == "f'bad mask, max {x.max()}'"
    assert got.__cause__ is None


@pytest.mark.parametrize("model", [CaughtGuard(), ChainedGuard(), TwoArguments()])
def test_a_guard_a_check_cannot_reproduce_is_refused_or_exact(model):
    try:
        program = stitch.export(model, (X, OK), examples=[((X * 2, OK), {})])
    except stitch.StitchError:
        return
    outcome = [None, None]
    for i, fn in enumerate((model, program)):
        try:
            outcome[i] = ("returned", fn(X, BAD))
        except Exception as e:  # noqa: BLE001 - compared
            outcome[i] = ("raised", type(e), str(e), repr(e.__cause__))
    assert outcome[0][0] == outcome[1][0]
    if outcome[0][0] == "raised":
        assert outcome[0] == outcome[1]
    else:
        torch.testing.assert_close(outcome[1][1], outcome[0][1])


class EqualGuard(nn.Module):
    """``torch.equal`` / ``torch.allclose`` return Python bools from data."""

    def forward(self, x, ref):
        if not torch.equal(x.round(), ref):
            raise ValueError("not integral")
        if torch.allclose(x, ref, atol=0.5):
            return x * 2
        return x - 1


def test_torch_equal_and_allclose_become_tensor_conditions():
    ref = torch.tensor([1.0, 2.0, 3.0])
    model = EqualGuard()
    program = stitch.export(model, (ref.clone(), ref), examples=[((ref + 0.4, ref), {})])
    for x in (ref, ref + 0.4, ref + 0.2):
        torch.testing.assert_close(program(x, ref), model(x, ref))
    got, want = _raised(program, ref + 0.7, ref), _raised(model, ref + 0.7, ref)
    assert (type(got), str(got)) == (type(want), str(want))


class EqualReported(nn.Module):
    """A ``torch.equal`` printed and returned: a Python bool in eager."""

    def forward(self, x, ref):
        same = torch.equal(x, ref)
        print("same", same)
        return x * 2, same


def test_a_printed_and_returned_torch_equal_stays_a_python_bool(capsys):
    ref = torch.tensor([1.0, 2.0, 3.0])
    model = EqualReported()
    program = stitch.export(model, (ref.clone(), ref), examples=[((ref + 1, ref), {})])
    capsys.readouterr()
    for x in (ref.clone(), ref + 1):
        got, want = program(x, ref), model(x, ref)
        assert got[1] is want[1]
        torch.testing.assert_close(got[0], want[0])
    assert capsys.readouterr().out == "same True\nsame True\nsame False\nsame False\n"


class EqualMethods(nn.Module):
    """The method forms, ``a.equal(b)`` / ``a.allclose(b, atol=...)``."""

    def forward(self, x, ref):
        if not x.round().equal(ref):
            raise ValueError("not integral")
        if x.allclose(ref, atol=0.5):
            return x * 2
        return x - 1


def test_the_method_forms_become_tensor_conditions_too():
    ref = torch.tensor([1.0, 2.0, 3.0])
    model = EqualMethods()
    program = stitch.export(model, (ref.clone(), ref), examples=[((ref + 0.4, ref), {})])
    for x in (ref, ref + 0.4, ref + 0.2):
        torch.testing.assert_close(program(x, ref), model(x, ref))
    got, want = _raised(program, ref + 0.7, ref), _raised(model, ref + 0.7, ref)
    assert (type(got), str(got)) == (type(want), str(want))


class TorchAssert(torch.nn.Module):
    def forward(self, x):
        torch._assert(x.sum() < 100, "too big")
        return x * 2


def test_torch_assert_on_data_becomes_a_runtime_check():
    """``torch._assert(c, msg)`` is ``assert c, msg``: a check in the graph (it was left as
    an unfixable break Dynamo calls a "Data dependent operator")."""
    model = TorchAssert()
    program = stitch.export(model, (torch.ones(3),), examples=[((torch.full((3,), 30.0),), {})])
    torch.testing.assert_close(program(torch.ones(3) * 2), model(torch.ones(3) * 2))
    with pytest.raises(AssertionError, match="too big"):
        model(torch.full((3,), 50.0))
    with pytest.raises(AssertionError, match="too big"):
        program(torch.full((3,), 50.0))


class AssertByItsName(torch.nn.Module):
    def forward(self, x):
        _assert(x.sum() < 100, "too big")  # ``from torch import _assert`` (timm's spelling)
        return x * 2


class AssertThroughAModule(torch.nn.Module):
    def forward(self, x):
        th._assert(x.sum() < 100, "too big")  # through the module's other name
        return x * 2


@pytest.mark.parametrize("model_type", [AssertByItsName, AssertThroughAModule])
def test_torch_assert_by_another_name_is_the_same_check(model_type):
    """The call is recognised by what its name holds in the module, not by its spelling:
    ``from torch import _assert`` (timm's), ``th._assert`` through ``import torch as th``
    (timm's ``layers._assert``)."""
    model = model_type()
    program = stitch.export(model, (torch.ones(3),), examples=[((torch.full((3,), 30.0),), {})])
    assert "runtime check" in str(program.report)
    torch.testing.assert_close(program(torch.ones(3) * 2), model(torch.ones(3) * 2))
    with pytest.raises(AssertionError, match="too big"):
        program(torch.full((3,), 50.0))


class AssertsInALoopAfterARead(torch.nn.Module):
    """``torch._assert`` where torch.export, not the census, stops: in a loop over layers,
    after a read (a print of ``.item()``) that makes Dynamo run the loop as Python."""

    def __init__(self):
        super().__init__()
        self.scales = nn.ModuleList([nn.Identity(), nn.Identity()])

    def forward(self, x):
        for scale in self.scales:
            x = scale(x)
            print(f"max={x.max().item():.1f}")
            _assert((x > 0).all(), "input rejected")
            x = x * 0.5
        return x


def test_torch_assert_where_torch_export_stops_is_a_check(capsys):
    model = AssertsInALoopAfterARead()
    program = stitch.export(model, (torch.rand(4, 8) + 0.1,),
                            examples=[((torch.rand(4, 8) + 0.5,), {})])
    assert "runtime check" in str(program.report)
    x = torch.rand(4, 8) + 0.2
    torch.testing.assert_close(program(x), model(x))
    with pytest.raises(AssertionError, match="input rejected"):
        program(-torch.ones(4, 8))
