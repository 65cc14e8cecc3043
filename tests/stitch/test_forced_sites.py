"""Every branch site is verified both ways, at any depth and under strict=True: a cond
nested in another cond's branch, and a ``where``, are found in the graph by their marks and
forced (with the sides that reach them) when the examples take only one side."""

from __future__ import annotations

import pytest
import torch
from kept_rows import KeepsRows, regroup_rows, some_and_none
from torch import nn

import stitch
from stitch.errors import VerificationError
from stitch.synthesize.operators import rt_control, rt_state, runtime
from stitch.synthesize.operators.site_marks import MARK


class Nested(nn.Module):
    """Outer cond; inside its true arm a cond (a Linear in an arm) and a where."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.inner = nn.Linear(8, 8)

    def forward(self, x):
        h = self.lin(x)
        if x.sum() > -1e6:
            if x.mean() > 1e6:
                h = self.inner(h) * 3
            else:
                h = h - 1
            if x.amin() > 1e6:
                h = h * 2
            else:
                h = h + 0.5
        else:
            h = torch.tanh(h)
        return h


X = torch.randn(2, 8)  # takes outer true, both inner false: three sides are never taken


def _model():
    torch.manual_seed(0)
    return Nested()


@pytest.fixture(scope="module")
def programs():
    return {strict: stitch.export(_model(), (X,), strict=strict) for strict in (False, True)}


@pytest.mark.parametrize("strict", [False, True])
def test_every_missed_side_is_forced_nested_included(programs, strict):
    program = programs[strict]
    ops = program.report.graph_ops
    assert ops.get("cond") == 2 and ops.get("where") == 1, ops
    forced = [c.what for c in program.report.checks if "forced" in c.what]
    nested = [w for w in forced if "(within" in w]
    # the two inner sites, each on the side the example misses, reached through the outer
    assert len(nested) == 2 and all(" forced true (within " in w for w in nested), forced
    outer = {w.split("(within ")[1].removesuffix(" true)") for w in nested}
    assert len(outer) == 1 and len(forced) == 3, forced
    assert f"{outer.pop()} forced false" in forced


@pytest.mark.parametrize("strict", [False, True])
def test_no_marks_left_and_all_paths_match_eager(programs, strict):
    program = programs[strict]
    for gm in program.exported_program.graph_module.modules():
        if isinstance(gm, torch.fx.GraphModule):
            assert not [n for n in gm.graph.nodes if n.target is MARK]
    model = _model()
    torch.manual_seed(1)
    for shift in (0.0, 1e7, -1e7):
        x = torch.randn(2, 8) + shift
        with torch.no_grad():
            torch.testing.assert_close(program(x), model(x))


def test_a_wrong_nested_arm_is_caught_by_forcing(monkeypatch):
    """Sabotage the traced graph only: every branch nested in another gets a wrong false
    arm. The example takes the inner false sides, so it catches that; and with the example
    taking the inner true sides, only forcing the inner false sides can."""
    select = rt_control.select

    def wrong_nested_false(predicate, true_fn, false_fn, operands, mode):
        if torch.compiler.is_dynamo_compiling():  # a branch nested in a traced cond
            def wrong(*ops):
                return tuple(v + 1 for v in false_fn(*ops))
            return select(predicate, true_fn, wrong, operands, mode)
        return select(predicate, true_fn, false_fn, operands, mode)

    monkeypatch.setattr(rt_control, "select", wrong_nested_false)
    with pytest.raises(VerificationError, match="example 0"):
        stitch.export(_model(), (X,))
    inner_true = X + 1e7  # outer true, both inner predicates true
    with pytest.raises(VerificationError, match=r"forced false \(within S\d+ true\)"):
        stitch.export(_model(), (inner_true,))


class NestedBufferWrites(nn.Module):
    """Buffers updated in a branch nested inside another: the inner cond's write-back is
    carried out through the outer cond (torch.cond forbids mutation inside a branch)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("running", torch.zeros(4))
        self.register_buffer("hits", torch.zeros(()))

    def forward(self, x):
        h = self.lin(x)
        if x.sum() > -1e6:
            h = h * 2
            if x.mean() > 0:
                self.running = 0.9 * self.running + 0.1 * h.mean(0)
                self.hits += 1
        return h + self.running


@pytest.mark.parametrize("strict", [False, True])
def test_nested_buffer_writes_are_carried_out_and_forced(strict):
    torch.manual_seed(0)
    model = NestedBufferWrites()
    up, down, away = torch.full((2, 4), 1.0), torch.full((2, 4), -1.0), torch.full((2, 4), -1e7)
    program = stitch.export(model, (up,), strict=strict)
    assert program.report.graph_ops.get("cond") == 2
    forced = [c.what for c in program.report.checks if "forced" in c.what]
    assert any("forced false (within" in w for w in forced), forced
    assert model.hits.item() == 0  # the user's model is untouched by export
    for x in (up, down, up, away, up):
        with torch.no_grad():
            torch.testing.assert_close(program(x), model(x))
        buffers = dict(program._module.named_buffers())
        torch.testing.assert_close(buffers["model.running"], model.running)
        torch.testing.assert_close(buffers["model.hits"], model.hits)
    assert model.hits.item() == 3


class CountsPositives(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("hits", torch.zeros(()))

    def forward(self, x):
        h = self.lin(x)
        if x.sum() > 0:
            self.hits += 1
        return h


def test_forced_sides_compare_buffers(monkeypatch):
    """The examples never take the side that counts; the graph is sabotaged to drop the
    buffer write. Outputs agree everywhere: only the forced run's buffer check can see it."""
    write_back = runtime.write_back

    def dropped_while_exporting(owner, attr, value, inplace=False):
        if not (torch.compiler.is_dynamo_compiling() or rt_state.is_tracing()):
            write_back(owner, attr, value, inplace)

    monkeypatch.setattr(runtime, "write_back", dropped_while_exporting)
    with pytest.raises(VerificationError, match="forced true: buffer hits differs"):
        stitch.export(CountsPositives(), (torch.full((2, 4), -1.0),))


def test_debug_dump_writes_each_rewritten_function(tmp_path):
    from stitch.settings import Settings

    stitch.export(_model(), (X,), settings=Settings(dump_dir=str(tmp_path)))
    [dump] = tmp_path.glob("round1-Nested.forward.py")
    text = dump.read_text()
    assert text.startswith(f"# {__file__}: Nested.forward, round 1")
    assert "torch.cond at line" in text and "torch.where at line" in text
    compile(text, str(dump), "exec")  # the rewritten source itself, as it was installed
    assert text.count("__stitch_rt__.cond(") == 3


def test_a_side_the_enclosing_arms_size_tests_exclude_is_not_forced():
    import sympy
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    from stitch.synthesize.operators.site_marks import SiteCopy
    from stitch.verify.forced import never_runs

    env = ShapeEnv()
    u = env.create_unbacked_symint().node.expr
    inside = SiteCopy(chain=(("S1", False),), conditions=(sympy.Min(150, u) > 0,),
                      truth=u > 0, env=env)
    assert never_runs([inside], {"S1": False, "S2": True}, True)  # u <= 0, then u > 0
    assert not never_runs([inside], {"S1": False, "S2": False}, False)
    on_data = SiteCopy(chain=(("S1", False),), conditions=(None,), truth=u > 0, env=env)
    assert not never_runs([on_data], {"S1": False, "S2": True}, True)
    at_top = SiteCopy(chain=(), conditions=(), truth=u > 0, env=env)  # another copy runs
    assert not never_runs([inside, at_top], {"S1": False, "S2": True}, True)



class SizeTestedAgainInTheRest(KeepsRows):
    def forward(self, x):
        h = self.lin(x)
        rows = h[(h[:, 0] > 0).nonzero()[:, 0]]
        out = regroup_rows(rows)
        out = out.reshape(rows.shape[0], 6)
        if rows.shape[0] > 0:  # in each arm of regroup_rows's cond, decided by its test
            out = out.reshape(rows.shape[0], 3, 2)[:, 0] * 2
        else:
            out = out[:, :2]
        return out


def test_a_size_test_the_examples_take_both_ways_is_verified_by_them_not_forced():
    # forced on example 0's sizes, the false arm (traced knowing n <= 0) would meet n > 0:
    # an input no program ever gets. Each side an example takes is verified by that example
    model = SizeTestedAgainInTheRest()
    x, none_kept = some_and_none(model.lin)
    program = stitch.export(model, (x,), examples=[((none_kept,), {})])
    assert not any("forced" in c.what for c in program.report.checks), program.report
    for v in (x, none_kept, -x):
        with torch.no_grad():
            assert torch.equal(program(v), model(v))


def test_an_untaken_side_of_a_size_test_that_forcing_cannot_check_asks_for_an_example():
    model = SizeTestedAgainInTheRest()
    x, _ = some_and_none(model.lin)
    with pytest.raises(VerificationError, match=r"tests sizes \(u\d+ > 0\), and no example "
                       r"takes this side(.|\n)*add an example that takes this side"):
        stitch.export(model, (x,))


class _Config:
    def __init__(self) -> None:
        self.history: list = []


class AppendsToAnObjectsList(nn.Module):
    """A plain object the model holds, whose list the forward appends to."""

    def __init__(self) -> None:
        super().__init__()
        self.lin, self.cfg = nn.Linear(4, 4), _Config()

    def forward(self, x):
        h = self.lin(x)
        self.cfg.history.append(h.mean())
        if h.sum() > 0:
            h = h * 2
        return h


@pytest.mark.parametrize("grad", [True, False])
def test_a_tensor_left_in_a_plain_objects_list_is_copied_for_the_forced_runs(grad):
    """The forced runs copy the working model; a tensor an analysis run left in
    ``self.cfg.history`` (not a graph leaf with autograd on, a fake tensor after a trace)
    must not make that copy raise: the append, state at ``cfg.history``, is replayed."""
    torch.manual_seed(0)
    model = AppendsToAnObjectsList().eval()
    x, other = torch.randn(2, 4) + 1, -torch.ones(2, 4) * 5
    with torch.set_grad_enabled(grad):
        program = stitch.export(model, (x,), examples=[((other,), {})])
    assert model.cfg.history == []
    with torch.no_grad():
        for v in (x, other):
            torch.testing.assert_close(program(v), model.lin(v) * (2 if model.lin(v).sum() > 0
                                                                   else 1))
            assert torch.equal(model.cfg.history[-1], model.lin(v).mean())
    assert len(model.cfg.history) == 2


class OneSided(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            y = x * 2
        else:
            y = x - 1
        return y


def test_an_untaken_side_is_checked_against_the_model_not_the_rewrite(monkeypatch):
    """Sabotage the rewrite itself: its false arm is wrong in the graph and in the
    rewritten Python alike. The example takes the true side; only forcing the model's own
    ``if`` (its source with the test replaced) can see the false side is wrong."""
    cond = runtime.cond

    def wrong_false(site, predicate, true_fn, false_fn, *args, **kwargs):
        def wrong(*ops):
            return tuple(v + 1 for v in false_fn(*ops))
        return cond(site, predicate, true_fn, wrong, *args, **kwargs)

    monkeypatch.setattr(runtime, "cond", wrong_false)
    with pytest.raises(VerificationError, match=r"S\d+ forced false: output leaf 0 differs"):
        stitch.export(OneSided(), (torch.ones(3),))


def test_the_report_says_which_sides_were_forced_in_the_model():
    program = stitch.export(OneSided(), (torch.ones(3),))
    assert any("1 checked against the model's own code" in n for n in program.report.notes)
    for x in (torch.ones(3), -torch.ones(3)):
        torch.testing.assert_close(program(x), OneSided()(x))


class PrintsInTest(nn.Module):
    """The forced model still evaluates the test: what the test prints is printed."""

    def forward(self, x):
        y = x * 3 if self.loud(x) else x + 1
        return y

    def loud(self, x):
        print("testing")
        return x.mean() > 0


def test_a_forced_test_is_still_evaluated(capsys):
    program = stitch.export(PrintsInTest(), (torch.ones(3),))
    assert any("1 checked against the model's own code" in n for n in program.report.notes)
    capsys.readouterr()
    torch.testing.assert_close(program(-torch.ones(3)), -torch.ones(3) + 1)
    assert capsys.readouterr().out == "testing\n"


class EarlyExit(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(3, 3) for _ in range(3))

    def forward(self, x):
        depth, h = torch.zeros(()), x
        for layer in self.layers:
            h = layer(h)
            if x.sum() > 100:  # the input's: every iteration tests the same
                break
            depth = depth + 1
        return h, depth


class EarlyExitAfterWork(EarlyExit):
    def forward(self, x):
        h = x
        for layer in self.layers:
            h = layer(h)
            if x.sum() > 100:
                h = h * 0.5
                break
        return h


def test_an_early_exit_is_forced_in_the_model_both_ways():
    """``if t: break`` becomes a flag: each iteration's guard (and the rest's ``if not
    stopped``) is true exactly where the model's test is false, so forcing them is forcing
    the model's test the other way: at the first iteration it breaks, or it never does."""
    torch.manual_seed(0)
    model = EarlyExit()
    for x in (torch.ones(3), torch.full((3,), 1e4)):  # never breaks; breaks at once
        program = stitch.export(model, (x,))
        assert any("1 checked against the model's own code" in n
                   for n in program.report.notes), program.report.notes
        for y in (torch.ones(3), torch.full((3,), 1e4), -torch.full((3,), 1e4)):
            torch.testing.assert_close(program(y), model(y))


def test_an_early_exit_with_work_before_it_is_named_as_checked_against_the_rewrite():
    """Work under the test before ``break`` runs on the test's true side and the guard's
    false: no one side of the model's test is the flag's, so that side is checked against
    the rewrite only, and the report says so."""
    torch.manual_seed(0)
    program = stitch.export(EarlyExitAfterWork(), (torch.ones(3),))
    assert any(n.startswith("checked against stitch's rewrite only") for n in
               program.report.notes), program.report.notes


def test_the_work_before_an_early_exit_is_forced_when_no_example_breaks(monkeypatch):
    """The guard and the breaking test are sites of their own: sharing one with opposite
    senses, the guard's true side (taken) would hide the test's (never taken) and leave the
    work before ``break`` unverified. Sabotage only that arm in the graph; forcing it must
    catch it."""
    carried = rt_control._carried

    def wrong_work(site, predicate, true_fn, false_fn, *args, **kwargs):
        if site == "S1":  # the breaking test's own cond (the guard is "S1.go")
            def wrong(*ops):
                return tuple(v + 1 for v in true_fn(*ops))
            return carried(site, predicate, wrong, false_fn, *args, **kwargs)
        return carried(site, predicate, true_fn, false_fn, *args, **kwargs)

    monkeypatch.setattr(rt_control, "_carried", wrong_work)
    torch.manual_seed(0)
    with pytest.raises(VerificationError, match=r"S\d+ forced true"):
        stitch.export(EarlyExitAfterWork(), (torch.ones(3),))


class BranchThenEarlyExit(EarlyExit):
    def forward(self, x):
        h = x
        for layer in self.layers:
            if x.mean() > 100:  # the examples take the false side only
                h = h * 0.5
            h = layer(h)
            if x.sum() > 1000:
                break
        return h


def test_a_branch_before_an_early_exit_keeps_its_own_site():
    """The loop's guard is named for the breaking test, not for the first site its lines
    hold: it took that site's name before, and its taken side hid the branch's untaken
    one, which was never forced."""
    torch.manual_seed(0)
    model = BranchThenEarlyExit()
    program = stitch.export(model, (torch.ones(3),))
    forced = [c.what for c in program.report.checks if "forced" in c.what]
    branch = next(d.site for d in program.report.decisions if d.location.endswith(
        f":{BranchThenEarlyExit.forward.__code__.co_firstlineno + 3}"))
    assert f"{branch} forced true" in forced, (forced, program.report.decisions)
    for y in (torch.ones(3), torch.full((3,), 200.0), torch.full((3,), 1e4)):
        torch.testing.assert_close(program(y), model(y))


def _scaled(x):
    """A module-level helper holding the branch (not a method of the model)."""
    if x.amax() > 1e6:
        return x * 4
    return x + 2


class ElifAndHelper(nn.Module):
    def forward(self, x):
        if x.sum() > 1e6:
            y = x * 2
        elif x.sum() < -1e6:
            y = x * 3
        else:
            y = x - 1
        return _scaled(y)


def test_an_elif_and_a_helpers_branch_are_forced_in_the_model():
    """Variants of where the forced test is written: the ``elif`` of a chain, and an
    ``if`` inside a module-level helper the forward calls."""
    program = stitch.export(ElifAndHelper(), (torch.ones(3),))
    note = next(n for n in program.report.notes if n.startswith("forced"))
    forced = sum("forced" in c.what for c in program.report.checks)
    assert forced >= 3 and f"; {forced} checked against the model's own code" in note, note
    for y in (torch.ones(3), torch.full((3,), 1e7), torch.full((3,), -1e7)):
        torch.testing.assert_close(program(y), ElifAndHelper()(y))
