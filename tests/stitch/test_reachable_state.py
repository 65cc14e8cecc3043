"""Python state stitch must find: state of a helper module reached as an attribute (``import helpers;
helpers.LOG.append(h)``) and of a helper class (a class-level registry): found, put back
after analysis whatever happens, replayed where stitch can, refused where it cannot."""

from __future__ import annotations

import collections
import logging
import re

import pytest
import state_helpers
import torch

import stitch


class AppendsThroughTheModule(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x)
        state_helpers.LOG.append(h.mean())
        return h


class CallsHelpers(AppendsThroughTheModule):
    def forward(self, x):
        state_helpers.count_call()
        state_helpers.mark(f"rows{x.shape[0]}")
        return self.lin(x)


class UsesARegistry(AppendsThroughTheModule):
    def forward(self, x):
        state_helpers.Registry.register("rows", x.shape[0])
        return self.lin(x)


def _fresh():
    state_helpers.LOG.clear()
    state_helpers.SEEN.clear()
    state_helpers.CALLS = 0
    state_helpers.Registry.items.clear()
    state_helpers.Registry.n = 0


def _state():
    return (len(state_helpers.LOG), state_helpers.CALLS, set(state_helpers.SEEN),
            dict(state_helpers.Registry.items), state_helpers.Registry.n)


def test_an_append_to_a_helper_modules_list_is_replayed():
    _fresh()
    torch.manual_seed(0)
    model, x = AppendsThroughTheModule(), torch.randn(2, 4)
    program = stitch.export(model, (x,), examples=[((x * 2,), {})])
    assert state_helpers.LOG == []  # analysis ran the forward; its appends were put back
    program(x)
    model(x)
    assert len(state_helpers.LOG) == 2
    torch.testing.assert_close(state_helpers.LOG[0], state_helpers.LOG[1])
    _fresh()


@pytest.mark.parametrize("model_class, named", [
    (CallsHelpers, "module global"), (UsesARegistry, "class attribute")])
def test_helper_state_stitch_cannot_replay_is_refused_and_put_back(model_class, named):
    _fresh()
    x = torch.randn(2, 4)
    with pytest.raises(stitch.VerificationError, match=named):
        stitch.export(model_class(), (x,), examples=[((x * 2,), {})])
    assert _state() == (0, 0, set(), {}, 0)


class KeepsADeque(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.recent = collections.deque(maxlen=3)

    def forward(self, x):
        h = self.lin(x)
        self.recent.append(h.mean())
        return h


def test_a_deque_the_forward_appends_to_is_not_dropped():
    x = torch.randn(2, 4)
    with pytest.raises(stitch.UnsupportedSideEffectError, match="'recent'"):
        stitch.export(KeepsADeque(), (x,), examples=[((x * 2,), {})])


class ListOfLayers(torch.nn.Module):
    """A plain list of submodules, also registered (MaskFormer 4.52's FPN blocks): read,
    never changed."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = [torch.nn.Linear(4, 4), torch.nn.ReLU()]
        for i, layer in enumerate(self.layers):
            self.add_module(str(i), layer)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def test_a_list_of_submodules_the_forward_only_reads_is_not_state():
    x = torch.randn(2, 4)
    model = ListOfLayers()
    program = stitch.export(model, (x,), examples=[((x * 2,), {})])
    torch.testing.assert_close(program(x * 3), model(x * 3))


class WithAnLSTM(torch.nn.Module):
    """torch's own bookkeeping (``nn.LSTM``'s ``_flat_weight_refs``, rebuilt per call) is
    not the model's state."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = torch.nn.LSTM(4, 4)

    def forward(self, x):
        return self.lstm(x)[0]


def test_torch_module_bookkeeping_is_not_state():
    torch.manual_seed(0)
    x = torch.randn(3, 1, 4)
    model = WithAnLSTM().eval()
    program = stitch.export(model, (x,), examples=[((x * 2,), {})])
    torch.testing.assert_close(program(x * 3), model(x * 3))


class MemoFromInput(torch.nn.Module):
    """A value memoized from the first input that takes a path: refused (the program would
    hold the examples' value for every caller)."""

    def forward(self, position_ids):
        if torch.max(position_ids) + 1 > 8:
            if not hasattr(self, "cached_scale"):
                self.cached_scale = position_ids.float().mean()
            return position_ids.float() * self.cached_scale
        return position_ids.float()


class MemoFromConfig(MemoFromInput):
    """A value memoized from the configuration (LongRoPE's long factors): the same for any
    input, held by the program."""

    def forward(self, position_ids):
        if torch.max(position_ids) + 1 > 8:
            if not hasattr(self, "long_scale"):
                self.long_scale = torch.arange(4).float() / 4
            return position_ids.float() * self.long_scale
        return position_ids.float()


def test_a_value_memoized_from_the_input_is_refused():
    with pytest.raises(stitch.UnsupportedSideEffectError, match="cached_scale"):
        stitch.export(MemoFromInput(), (torch.arange(4),),
                      examples=[((torch.arange(10, 14),), {})])


def test_a_value_memoized_from_the_configuration_is_held():
    program = stitch.export(MemoFromConfig(), (torch.arange(4),),
                            examples=[((torch.arange(10, 14),), {})])
    for x in (torch.arange(20, 24), torch.arange(4)):
        torch.testing.assert_close(program(x), MemoFromConfig()(x))


class KeepsLastSum(torch.nn.Module):
    """A Python number read from the input, set on every call: one example's two analysis
    calls set the same value, and no tensor marks it as the input's. The program never set
    it (``model.last`` stayed unset after ``program(y)``)."""

    def forward(self, x):
        self.last = float(x.sum())
        return x * 2


class SetsByName(torch.nn.Module):
    def forward(self, x):
        setattr(self, "seen", int(x.sum() > 0))  # noqa: B010 - the form under test
        return x * 2


class FlagFromData(torch.nn.Module):
    """An attribute the model has, set from the input on every call, that every example
    leaves as it was (False): the runs changed nothing, the program never set it (True on
    an input whose sum is positive)."""

    def __init__(self) -> None:
        super().__init__()
        self.positive = False

    def forward(self, x):
        self.positive = bool(x.sum() > 0)
        return x * 2


class SetsThroughDict(torch.nn.Module):
    def forward(self, x):
        self.__dict__["peak"] = float(x.max())
        return x * 2


@pytest.mark.parametrize("model, name, line", [
    (SetsThroughDict, "peak", '__dict__["peak"] ='),
    (KeepsLastSum, "last", "self.last = float"), (SetsByName, "seen", 'setattr(self, "seen"'),
    (FlagFromData, "positive", "self.positive = bool")])
def test_a_number_set_from_the_input_with_one_example_is_refused_at_its_line(model, name,
                                                                              line):
    with pytest.raises(stitch.UnsupportedSideEffectError, match=repr(name)) as refused:
        stitch.export(model(), (-torch.ones(2, 4),))  # one example, every value unchanged
    file, number = re.search(r"(\S+\.py):(\d+)", str(refused.value)).groups()
    assert file == __file__ and line in open(file).readlines()[int(number) - 1], number


class CacheFromNone(torch.nn.Module):
    """The same memo written ``if self.cache is None:`` with the attribute set to None in
    ``__init__`` (it slipped past the ``hasattr`` form's check: the program held example
    0's value and never set it)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin, self.cache = torch.nn.Linear(4, 4), None

    def forward(self, x):
        h = self.lin(x)
        if self.cache is None:
            self.cache = h.detach().clone()
        if h.sum() > 0:
            h = h + 1
        return h + self.cache


def test_a_value_memoized_from_the_input_into_a_none_attribute_is_refused():
    torch.manual_seed(0)
    with pytest.raises(stitch.UnsupportedSideEffectError, match="'cache'"):
        stitch.export(CacheFromNone(), (torch.randn(2, 4) + 1,),
                      examples=[((-torch.ones(2, 4) * 5,), {})])


class KeepsALogger(torch.nn.Module):
    """A logger held as an attribute: its level cache fills as it logs (library state,
    compared by identity), the call is replayed."""

    def __init__(self) -> None:
        super().__init__()
        self.log = logging.getLogger("stitch.tests.reachable")

    def forward(self, x):
        self.log.warning("sum %s", x.sum())
        return x * 2


def test_a_logger_attribute_is_not_state():
    x = torch.ones(3)
    program = stitch.export(KeepsALogger(), (x,), examples=[((x * 2,), {})])
    torch.testing.assert_close(program(x), x * 2)


def _record(value, acc=[]):  # noqa: B006 - the mutable default is the point
    acc.append(value)


def _record_kw(value, *, acc=[]):  # noqa: B006 - a keyword-only default, the same state
    acc.append(value)


class AppendsToADefault(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x)
        _record(h.max())  # on every call: the helper's default list is state
        if h.sum() > 0:
            _record(h.min())
            _record_kw(h.mean())
            h = h + 1
        return h


def test_a_helpers_mutable_default_is_state_the_program_appends_to():
    """A default argument is a slot (``default:...``): the program appends to it as eager
    does (it appended nothing outside the branch: the trace dropped it, unverified)."""
    torch.manual_seed(0)
    model = AppendsToADefault().eval()
    x, other = torch.ones(2, 4) * 3, -torch.ones(2, 4) * 5
    program = stitch.export(model, (x,), examples=[((other,), {})])
    acc = _record.__defaults__[0]
    assert acc == []  # the analysis runs' appends were put back
    with torch.no_grad():
        for call in (model, program):
            for inputs in (x, other):
                call(inputs)
    half = len(acc) // 2
    assert half >= 2 and len(acc) == 2 * half
    torch.testing.assert_close(acc[half:], acc[:half])
    acc.clear()
    kw = _record_kw.__kwdefaults__["acc"]
    assert len(kw) == 2 * (len(kw) // 2) and kw, kw
    torch.testing.assert_close(kw[len(kw) // 2:], kw[:len(kw) // 2])
    kw.clear()
