"""Python state outside the model's instances: lists on the class, in module globals and in
closure cells are deferred (appends, also in branches) and verified; other changes are
refused with the place; stitch.export leaves all of it as it found it."""

from __future__ import annotations

import sys

import pytest
import torch

import stitch
from stitch.epilogue import replay as real_replay

HISTORY: list = []  # a module global the forward appends to
CALLS = {"n": 0}


class Base(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)


class ClassListInBranch(Base):
    history: list = []  # on the class: every instance (and every copy) shares it

    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0:
            type(self).history.append(h.mean())
            h = h * 2
        HISTORY.append(h.sum())
        return h


class NamedClassList(Base):
    seen: list = []

    def forward(self, x):
        h = self.lin(x)
        if h.mean() > 0:
            NamedClassList.seen.append(h.max())  # the class by name
        NamedClassList.seen.extend([h.min(), 2])  # extend: one append per item
        return h.relu()


class ClassCounter(Base):
    calls = 0

    def forward(self, x):
        ClassCounter.calls += 1  # a counter it also reads: refused (tests/test_counters.py
        if ClassCounter.calls < 0:  # has those it only adds to)
            x = -x
        return self.lin(x)


class DictGlobal(Base):
    def forward(self, x):
        CALLS["n"] += 1  # an item it also reads: refused (test_dict_items.py has those it
        if CALLS["n"] < 0:  # only sets or adds to)
            x = -x
        return self.lin(x)


def _recorder():
    seen: list = []  # reachable only through the helper's closure cell

    def record(value):
        seen.append(value)

    record.seen = seen  # for the test's eyes only (an attribute, not a slot)
    return record


record_max = _recorder()


class ClosureList(Base):
    def forward(self, x):
        h = self.lin(x)
        record_max(h.max())  # a helper that appends to the list its closure holds
        return h


def _both(model):
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    pos = x if model.lin(x).sum() > 0 else -x
    neg = -pos
    return pos, neg


def _world():
    return (list(ClassListInBranch.history), list(HISTORY), list(NamedClassList.seen),
            ClassCounter.calls, dict(CALLS))


@pytest.fixture(autouse=True)
def _clean():
    for values in (ClassListInBranch.history, HISTORY, NamedClassList.seen):
        values.clear()
    yield
    for values in (ClassListInBranch.history, HISTORY, NamedClassList.seen):
        values.clear()


def _eager_vs_program(model, program, inputs, lists):
    """Run eager then the program on each input; the lists grow by equal values."""
    for x in inputs:
        sizes = [len(v) for v in lists]
        want = model(x)
        eager_new = [list(v[n:]) for v, n in zip(lists, sizes, strict=True)]
        sizes = [len(v) for v in lists]
        got = program(x)
        program_new = [list(v[n:]) for v, n in zip(lists, sizes, strict=True)]
        torch.testing.assert_close(got, want)
        assert len(eager_new) == len(program_new)
        for a, b in zip(eager_new, program_new, strict=True):
            assert len(a) == len(b)
            for u, w in zip(a, b, strict=True):
                torch.testing.assert_close(w, u)


@pytest.mark.parametrize("make, lists", [
    (ClassListInBranch, lambda m: [ClassListInBranch.history, HISTORY]),
    (NamedClassList, lambda m: [NamedClassList.seen]),
], ids=["class-and-global", "class-extend"])
def test_appends_outside_the_instance_are_deferred_in_branches(make, lists):
    torch.manual_seed(0)
    model = make()
    pos, neg = _both(model)
    before = _world()
    program = stitch.export(model, (pos,), examples=[((neg,), {})])
    assert _world() == before  # stitch.export left the shared state as it was
    assert program.report.graph_ops.get("cond") == 1, str(program.report)
    assert any(t.startswith("class:") for t in program.epilogue.append_targets)
    _eager_vs_program(model, program, [pos, neg, pos], lists(model))


def test_a_closure_captured_list_is_deferred():
    torch.manual_seed(0)
    model = ClosureList()
    seen = record_max.seen
    seen.clear()
    pos, neg = _both(model)
    program = stitch.export(model, (pos,), examples=[((neg,), {})])
    assert seen == []
    assert any(t.startswith("closure:") for t in program.epilogue.append_targets)
    _eager_vs_program(model, program, [neg, pos], [seen])
    assert len(seen) == 4  # one append per call, from the model and from the program


@pytest.mark.parametrize("make, what", [
    (ClassCounter, r"class attribute .*ClassCounter\.calls"),
    (DictGlobal, r"module global .*CALLS"),
], ids=["class-counter", "global-dict"])
def test_other_changes_are_refused_with_the_place(make, what):
    torch.manual_seed(0)
    model = make()
    before = _world()
    with pytest.raises(stitch.UnsupportedSideEffectError, match=what) as info:
        stitch.export(model, (torch.randn(4, 8),))
    assert "test_python_state.py:" in str(info.value)
    assert _world() == before


def test_dropping_a_replay_is_caught_by_verification(monkeypatch):
    """Sabotage: the program's epilogue forgets its appends. Verification compares the
    class and global lists between model and program, so export must refuse."""
    def forgetful(epilogue, extras, printer=None, lists=None):
        kept = [e for e in epilogue.entries if e.kind != "append"]
        return real_replay(type(epilogue)(tuple(kept), epilogue.num_outputs), extras, printer, lists)

    from stitch.running import run_with_epilogue  # replays through its module's `replay`

    monkeypatch.setattr(sys.modules[run_with_epilogue.__module__], "replay", forgetful)
    torch.manual_seed(0)
    model = ClassListInBranch()
    pos, neg = _both(model)
    with pytest.raises(stitch.StitchError, match=r"appended to 'class:.*history'|differs"):
        stitch.export(model, (pos,), examples=[((neg,), {})])
    assert ClassListInBranch.history == [] and HISTORY == []


class MovedCache(Base):
    """Rebinds an attribute on every call to an equal value (torchvision's anchor
    generator, a cache moved to the input's device): nothing to replay, not refused."""

    def __init__(self) -> None:
        super().__init__()
        self.anchors = [torch.arange(8.0), torch.ones(8)]

    def forward(self, x):
        self.anchors = [a.to(x.device, x.dtype) * 1 for a in self.anchors]
        return self.lin(x) + self.anchors[0]


class DriftingAttribute(Base):
    """A recurrent state: a plain tensor attribute set to a new tensor on every call."""

    def __init__(self) -> None:
        super().__init__()
        self.state = torch.zeros(8)

    def forward(self, x):
        self.state = self.state * 0.5 + x.mean(0)
        return self.lin(x) + self.state


class Cell(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("h", torch.zeros(8))

    def forward(self, x):
        self.h = torch.tanh(self.h + x.mean(0))  # rebinds a registered buffer
        return x + self.h


class SubmoduleState(Base):
    """A submodule rebinding its buffer: torch.export (2.14) drops that silently."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = Cell()

    def forward(self, x):
        return self.cell(self.lin(x))


class GrowingAttribute(Base):
    def __init__(self) -> None:
        super().__init__()
        self.last = torch.zeros(0, 8)

    def forward(self, x):
        self.last = torch.cat([self.last, x])  # grows every call: no buffer can hold it
        return self.lin(x)


class LastOutput(Base):
    """Keeps each call's output (a per-call state, not a moved cache): after each pass over
    the examples it holds the same value, but it differs from one example to the next."""

    def __init__(self) -> None:
        super().__init__()
        self.last = torch.zeros(4, 8)

    def forward(self, x):
        h = self.lin(x)
        self.last = h.detach() * 1
        return h


class LastOfAnyLength(LastOutput):
    def forward(self, x):
        h = self.lin(x)
        self.last = h[1:].detach() * 1  # its shape follows the batch
        return h


def test_an_attribute_that_follows_each_input_is_kept():
    torch.manual_seed(0)
    model = LastOutput()
    x = torch.randn(4, 8)
    program = stitch.export(model, (x,), examples=[((x * 2,), {})])
    for xi in (x, x * 3):
        torch.testing.assert_close(program(xi), model(xi))
        torch.testing.assert_close(dict(program._module.named_buffers())["model.last"],
                                   model.last)


def test_an_attribute_that_follows_each_input_in_shape_is_set_by_the_epilogue():
    """No buffer can hold it (its shape follows the input's): the graph returns it and the
    epilogue sets it, for every batch size."""
    torch.manual_seed(0)
    model, x = LastOfAnyLength(), torch.randn(4, 8)
    batch = torch.export.Dim("batch", min=3)
    program = stitch.export(model, (x,), examples=[((x[:3],), {})],
                            dynamic_shapes=({0: batch},))
    assert any("'last'" in n and "epilogue sets it" in n for n in program.report.notes)
    for xi in (x, torch.randn(7, 8)):
        torch.testing.assert_close(program(xi), model(xi))
        assert model.last.shape[0] == xi.shape[0] - 1


def test_an_attribute_rebound_to_an_equal_value_is_not_state():
    torch.manual_seed(0)
    model = MovedCache()
    x = torch.randn(4, 8)
    program = stitch.export(model, (x,), examples=[((x * 2,), {})])
    torch.testing.assert_close(program(x), model(x))


@pytest.mark.parametrize("make, path", [(DriftingAttribute, "state"),
                                        (SubmoduleState, "cell.h")],
                         ids=["tensor-attribute", "submodule-buffer"])
def test_a_recurrent_state_is_kept_and_updated_by_the_program(make, path):
    torch.manual_seed(0)
    model = make()
    x = torch.randn(4, 8)
    start = model.get_submodule(path.rpartition(".")[0]).__getattr__(
        path.rpartition(".")[2]).clone() if "." in path else model.state.clone()
    program = stitch.export(model, (x,), examples=[((x * 2,), {})])
    owner, _, name = path.rpartition(".")
    now = getattr(model.get_submodule(owner), name)
    torch.testing.assert_close(now, start)  # exporting left the model's state alone
    for step in range(3):  # the state compounds alike, call after call
        xi = x + step
        torch.testing.assert_close(program(xi), model(xi))
    buffers = dict(program._module.named_buffers())
    torch.testing.assert_close(buffers[f"model.{path}"], getattr(model.get_submodule(owner),
                                                                  name))


def test_a_dropped_state_update_is_caught_by_verification(monkeypatch):
    """Sabotage: the export step forgets to write a rebound buffer back (as torch.export
    does for a submodule's buffer); verification compares the state and refuses."""
    from stitch import export_wrapper

    monkeypatch.setattr(export_wrapper, "_write_back_rebound", lambda held: None)
    torch.manual_seed(0)
    with pytest.raises(stitch.VerificationError, match="buffer cell.h differs"):
        stitch.export(SubmoduleState(), (torch.randn(4, 8),))


def test_a_state_that_changes_shape_is_refused():
    """It reads its old value (found by running with that value made unusable): setting it
    after the graph would not give the next call what the model's forward reads."""
    torch.manual_seed(0)
    with pytest.raises(stitch.UnsupportedSideEffectError, match="attribute 'last'"):
        stitch.export(GrowingAttribute(), (torch.randn(4, 8),))


class ScratchPyramid(Base):
    """RAFT's correlation block: a list attribute rebuilt on every call before it is read,
    a dummy until the first call (no buffer can hold it), and a counter beside it."""

    def __init__(self) -> None:
        super().__init__()
        self.pyramid = [torch.tensor(0)]

    def forward(self, x):
        h = self.lin(x)
        self.pyramid = [h]
        for _ in range(2):
            self.pyramid.append(self.pyramid[-1] * 0.5)
        return sum(p.sum() for p in self.pyramid) + h


class ScratchAndCounter(ScratchPyramid):
    calls = 0

    def forward(self, x):
        ScratchAndCounter.calls += 1
        if ScratchAndCounter.calls < 0:  # read: refused, not replayed as a counter
            x = -x
        return super().forward(x)


def test_state_rebuilt_before_it_is_read_is_set_by_the_epilogue():
    """RAFT's pattern: the program sets the attribute after each call, to a new list of the
    graph's values, as the forward does (the model's own attribute untouched by export)."""
    torch.manual_seed(0)
    model, x = ScratchPyramid(), torch.randn(4, 8)
    program = stitch.export(model, (x,), examples=[((x * 2,), {})])
    assert len(model.pyramid) == 1  # exporting left the model's attribute alone
    for xi in (x, x * 3):
        torch.testing.assert_close(program(xi), model(xi))
        assert type(model.pyramid) is list and len(model.pyramid) == 3
        torch.testing.assert_close(model.pyramid[2], model.lin(xi) * 0.25)
    assert any("'pyramid'" in n and "epilogue sets it" in n for n in program.report.notes)
    rebinds = [e for e in program.epilogue.entries if e.kind == "rebind"]
    assert [e.options["target"] for e in rebinds] == ["pyramid"]
    # one example: each call sets an equal value, as a moved cache would; set before it is
    # read, it is replayed all the same (a moved cache reads itself first)
    alone = stitch.export(model, (x,))
    assert [e.options["target"] for e in alone.epilogue.entries if e.kind == "rebind"] == [
        "pyramid"]
    alone(x * 5)
    torch.testing.assert_close(model.pyramid[0], model.lin(x * 5))


class ClassLevels(Base):
    """The same, kept on the class (a slot outside the instance)."""

    levels = None

    def forward(self, x):
        h = self.lin(x)
        ClassLevels.levels = {"fine": h, "coarse": (h * 0.5, 2)}
        return h + ClassLevels.levels["coarse"][0]


def test_a_class_attribute_rebuilt_on_every_call_is_set_by_the_epilogue():
    torch.manual_seed(0)
    model, x = ClassLevels(), torch.randn(4, 8)
    ClassLevels.levels = None
    program = stitch.export(model, (x,), examples=[((x * 2,), {})])
    assert ClassLevels.levels is None
    expected = model(x * 3)
    want = ClassLevels.levels
    ClassLevels.levels = None
    torch.testing.assert_close(program(x * 3), expected)
    torch.testing.assert_close(ClassLevels.levels, want)


def test_a_dropped_rebinding_is_caught_by_verification(monkeypatch):
    """Sabotage: the recorder forgets the rebinding; verification compares the state the
    forward set with what the program left, and refuses."""
    from stitch.epilogue.record import Recorder

    monkeypatch.setattr(Recorder, "rebind", lambda self, target, value, location: None)
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    with pytest.raises(stitch.VerificationError, match="'pyramid' holds another value"):
        stitch.export(ScratchPyramid(), (x,), examples=[((x * 2,), {})])


class LevelsInABranch(Base):
    """Set only on the calls that take the branch: the others keep the old value."""

    def __init__(self) -> None:
        super().__init__()
        self.levels = None

    def forward(self, x):
        h = self.lin(x)
        if h.mean() > 0:
            self.levels = _levels(h)  # a container the rewrite cannot see
        return h * 2


def _levels(h):
    return [h, h * 2]


def _taking(model, x, side: bool):
    return x if (model.lin(x).mean() > 0) == side else -x


def test_state_set_by_a_helper_in_a_branch_is_refused_naming_it():
    """Set on some calls only, to a container a helper builds (the rewrite sees a call, not
    a container): no replay covers it, so the export refuses naming the set, whether or not
    the examples take the branch (before, an equal value on both passes over the examples
    passed for a moved cache, and the program silently never set it)."""
    torch.manual_seed(0)
    model = LevelsInABranch()
    x = _taking(model, torch.randn(4, 8), True)
    for other in (-x, x * 2):
        with pytest.raises(stitch.UnsupportedSideEffectError,
                           match=r"test_python_state.py:\d+: the forward sets 'levels'"
                                 r"(.|\n)*keeps or reads its old value"):
            stitch.export(model, (x,), examples=[((other,), {})])


class ClassStateInABranch(Base):
    last = None

    def forward(self, x):
        h = self.lin(x)
        if h.mean() > 0:
            type(self).last = (h.sum(), 5)
            h = h * 2
        return h


class ListStateInABranch(LevelsInABranch):
    def forward(self, x):
        h = self.lin(x)
        if h.mean() > 0:
            self.levels = [h, h * 2]
        return h * 2


@pytest.mark.parametrize("make, read", [(ClassStateInABranch, lambda m: type(m).last),
                                        (ListStateInABranch, lambda m: m.levels)])
@pytest.mark.parametrize("both_sides", [True, False])
def test_state_a_branch_sets_is_set_by_the_epilogue_when_the_branch_ran(make, read,
                                                                        both_sides):
    """A class attribute, or a list the branch builds, set only by the calls taking the
    branch: the epilogue sets it when the graph's branch ran, and it keeps its old value
    otherwise, as in eager; verified on every example and forced side (also when every
    example takes the branch)."""
    torch.manual_seed(0)
    model = make()
    x = _taking(model, torch.randn(4, 8), True)
    other = -x if both_sides else x * 2
    ClassStateInABranch.last = None
    program = stitch.export(model, (x,), examples=[((other,), {})])
    assert ClassStateInABranch.last is None and getattr(model, "levels", None) is None
    eager, eager_states = make(), []
    eager.load_state_dict(model.state_dict())
    sequence = (x, -x, -x, x * 3, -x)
    for xi in sequence:
        eager_states.append((eager(xi), _snapshot(read(eager))))
    ClassStateInABranch.last = None
    for xi, (want, state) in zip(sequence, eager_states, strict=True):
        torch.testing.assert_close(program(xi), want)
        torch.testing.assert_close(_snapshot(read(model)), state)
    ClassStateInABranch.last = None


def _snapshot(value):
    return None if value is None else [v.clone() if isinstance(v, torch.Tensor) else v
                                       for v in value]


class ScratchPlan(Base):
    """Scratch no container rule can rebuild (an object holding tensors), a dummy until the
    first call."""

    def __init__(self) -> None:
        super().__init__()
        self.plan = None

    def forward(self, x):
        import types

        h = self.lin(x)
        self.plan = types.SimpleNamespace(levels=[h, h * 0.5])
        return h + self.plan.levels[1]


def test_scratch_state_is_refused_unless_declared_and_then_reported():
    torch.manual_seed(0)
    model, x = ScratchPlan(), torch.randn(4, 8)
    with pytest.raises(stitch.UnsupportedSideEffectError,
                       match=r"attribute 'plan'(.|\n)*unchecked_state=\('plan',\)"):
        stitch.export(model, (x,), examples=[((x * 2,), {})])
    program = stitch.export(model, (x,), examples=[((x * 2,), {})],
                            settings=stitch.Settings(unchecked_state=("plan",)))
    assert model.plan is None  # exporting left the model's attribute alone
    for xi in (x, x * 3):
        torch.testing.assert_close(program(xi), model(xi))
    assert any("'plan'" in n and "unchecked_state" in n for n in program.report.notes)


def test_declaring_one_attribute_scratch_does_not_hide_other_state():
    torch.manual_seed(0)
    with pytest.raises(stitch.UnsupportedSideEffectError, match="calls"):
        x = torch.randn(4, 8)
        stitch.export(ScratchAndCounter(), (x,), examples=[((x * 2,), {})],
                      settings=stitch.Settings(unchecked_state=("pyramid",)))


class ReadsItsPyramid(ScratchPyramid):
    """Not scratch: the next call reads what this one left."""

    def forward(self, x):
        h = self.lin(x) + self.pyramid[-1].sum()
        self.pyramid = [h, h * 0.5]
        return h


def test_state_wrongly_declared_scratch_is_caught_by_verification():
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    with pytest.raises(stitch.UnsupportedSideEffectError, match="attribute 'pyramid'"):
        stitch.export(ReadsItsPyramid(), (x,), examples=[((x * 2,), {})])  # read, then set
    with pytest.raises(stitch.StitchError, match="differs"):
        stitch.export(ReadsItsPyramid(), (x,), examples=[((x * 2,), {})],
                      settings=stitch.Settings(unchecked_state=("pyramid",)))


SCRATCH = {}  # a module-level cache the forward rebuilds on every call


class GlobalScratch(Base):
    def forward(self, x):
        h = self.lin(x)
        SCRATCH.clear()  # cleared, then rebuilt: not only item sets (those are replayed)
        SCRATCH["levels"] = [h, h * 0.5]
        return h + SCRATCH["levels"][1]


def _declared(error: Exception) -> tuple:
    import ast
    import re

    return ast.literal_eval(re.search(r"unchecked_state=(\(.*?,\))\)", str(error)).group(1))


@pytest.mark.parametrize("make, also", [(ScratchAndCounter, ("pyramid",)), (GlobalScratch, ())])
def test_the_setting_a_refusal_prints_exports_class_and_global_scratch(make, also):
    """The refusal names a class attribute or module global with the exact setting; passed
    back, it exports (the state neither refused nor compared) and the report lists it."""
    torch.manual_seed(0)
    model, x = make(), torch.randn(4, 8)
    examples = [((x * 2,), {})]
    with pytest.raises(stitch.UnsupportedSideEffectError) as refused:
        stitch.export(model, (x,), examples=examples,
                      settings=stitch.Settings(unchecked_state=also))
    declared = _declared(refused.value)
    assert declared and all(t.split(":")[-1].endswith(("calls", "SCRATCH")) for t in declared)
    program = stitch.export(model, (x,), examples=examples,
                            settings=stitch.Settings(unchecked_state=also + declared))
    for xi in (x, x * 3):
        torch.testing.assert_close(program(xi), model(xi))
    for target in declared:
        assert any(repr(target) in n and "unchecked_state" in n for n in program.report.notes)


def test_a_class_attribute_is_located_in_its_own_class():
    """Two classes of one file bump an attribute named ``calls``: the refusal points at the
    line in the class that owns the attribute, not the first ``.calls +=`` of the file."""
    import inspect

    torch.manual_seed(0)
    source, start = inspect.getsourcelines(ScratchAndCounter)
    line = start + next(i for i, s in enumerate(source) if "calls += 1" in s)
    with pytest.raises(stitch.UnsupportedSideEffectError, match=rf"test_python_state.py:{line}:"):
        x = torch.randn(4, 8)
        stitch.export(ScratchAndCounter(), (x,), examples=[((x * 2,), {})],
                      settings=stitch.Settings(unchecked_state=("pyramid",)))


# a continuation carries two top-level sets of `self.levels` into the cond's arms; the read
# after the second set must read the second set's value (one local per attribute in an arm:
# with a local per set, the first would rewrite every read after it)
SET_TWICE_AROUND_A_FLAG = """\
        f1 = h.mean() > -0.1
        if f1:
            v1 = torch.tanh(self.l1(h))
        self.levels = [h * 0.5, h.mean(0)]
        h = h + self.levels[1] * 0.1
        if f1:
            h = h + v1 * 0.5
        self.levels = [h * 0.5, h.mean(0)]
        h = h + self.levels[1] * 0.1
        return h * (1.0 + 0.1 * n) * scale, n, scale
"""


def test_a_read_after_a_second_set_in_an_arm_reads_the_second_value(tmp_path):
    from tests.zoo import fuzz

    module = fuzz.load_program(fuzz.HEADER + SET_TWICE_AROUND_A_FLAG, str(tmp_path))
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(4, 8, generator=g) for _ in range(2)]
    model = module.Fuzz()
    sides = [x if (model.l0(x).tanh() + x * 0.1).mean() > -0.1 else x - 10 for x in xs]
    program = stitch.export(model, (sides[0],), examples=[((sides[0] - 10,), {})])
    eager = module.Fuzz()
    for x in (sides[0], sides[0] - 10, xs[1] * 3):
        torch.testing.assert_close(program(x), eager(x))
        torch.testing.assert_close(model.levels, eager.levels)


class ItemsFollowTheInput(torch.nn.Module):
    """A dict changed in place to hold the input's size: after both passes over the
    examples it holds what it held after the first (the last example's size), so only its
    value after each example shows the change."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.stats = {}

    def forward(self, x):
        self.stats["rows"] = x.shape[0]
        return self.lin(x) * 2


class ObjectFollowsTheInput(torch.nn.Module):
    """A plain object's attribute changed in place to the input's size: state at its own
    path (``cfg.rows``), set again by the epilogue like a module's attribute."""

    def __init__(self) -> None:
        super().__init__()
        import types

        self.lin = torch.nn.Linear(8, 8)
        self.cfg = types.SimpleNamespace(rows=0)

    def forward(self, x):
        self.cfg.rows = x.shape[0]
        return self.lin(x) * 2


def _rows_examples():
    torch.manual_seed(0)
    return [((torch.randn(n, 8),), {}) for n in (3, 5)]


def test_dict_items_following_the_input_are_replayed():
    model = ItemsFollowTheInput()
    examples = _rows_examples()
    program = stitch.export(model, examples[0][0], examples=examples,
                            dynamic_shapes=({0: torch.export.Dim("rows", min=2, max=64)},))
    assert [(e.kind, e.options["key"]) for e in program.epilogue.entries] == [
        ("set_item", "rows")]
    program(torch.randn(7, 8))
    assert model.stats == {"rows": 7}


def test_an_object_attribute_following_the_input_is_replayed():
    """An attribute of a plain object the model holds is state at its own path, measured
    and set again by the epilogue as a module's attribute is."""
    model = ObjectFollowsTheInput()
    examples = _rows_examples()
    program = stitch.export(model, examples[0][0], examples=examples,
                            dynamic_shapes=({0: torch.export.Dim("rows", min=2, max=64)},))
    assert [(e.kind, e.options["target"]) for e in program.epilogue.entries] == [
        ("rebind", "cfg.rows")]
    program(torch.randn(7, 8))
    assert model.cfg.rows == 7
