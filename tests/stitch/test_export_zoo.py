"""stitch.export on the pattern zoo: one graph, the right HOPs, eager's values and text."""

from __future__ import annotations

import contextlib
import copy
import io
import logging
import warnings

import pytest
import torch
import torch.utils._pytree as pytree
from conftest import zoo_census, zoo_program

import stitch
from stitch.plain_export import FIRST
from stitch.plan import Action
from tests.zoo import CASES, make

# case -> (graph ops the stitched graph must hold, at least this many)
EXPECTED_OPS = {
    "branch_on_item": {"where": 1},
    "branch_on_tensor": {"cond": 1},
    "flag_then_branch": {"cond": 1},
    "print_stats": {},
    "log_warning": {},
    "warns_user": {},
    "assert_finite": {"assert": 1},
    "raise_on_nan": {"assert": 1},
    "tensor_counted_loop": {"while_loop": 1},
    "halve_until_small": {"while_loop": 1},
    "early_exit_layers": {"cond": 2},
    "scalar_scale": {},
    "nested_encoder": {"cond": 2},
    "elif_chain": {"cond": 2},
    "and_or_predicate": {"cond": 1},
    "early_return": {"cond": 1},
    "buffer_in_branch": {"cond": 1},
    "print_in_branch": {"cond": 1},
    "effects_in_nested_branches": {"cond": 3},
}
RUNS_REST_IN_PYTHON = {"early_exit_layers"}
UNFIXABLE = {"nonzero_gather": "dynamic_shape", "calls_disabled": "unsupported_call"}
# how each is taken: a nonzero torch.export captures with a symbolic size; a call of a
# torch.compiler.disable'd function is traced as written (synthesize/convert/undisable.py)
TAKEN = {"nonzero_gather": Action.SYMBOLIC, "calls_disabled": Action.UNDISABLED}
# what torch.export takes as written before any census (no effect, no state, no data read)
FIRST_TAKEN = {"calls_disabled"}


def fresh_program(name: str, strict: bool = False) -> stitch.StitchedProgram:
    """The shared program, with its own copy of the buffers (calls mutate them)."""
    shared = zoo_program(name, strict)
    return stitch.StitchedProgram(copy.deepcopy(shared.exported_program), shared.epilogue)


def run_eager_and_program(name: str, ex_args, ex_kwargs):
    """Outputs and everything said, for a fresh model and a fresh copy of the program."""
    model = make(name)[0]
    program = fresh_program(name)
    results = []
    for fn in (model, program):
        out, err = io.StringIO(), io.StringIO()
        records = []
        handler = logging.Handler()
        handler.emit = lambda r, records=records: records.append(r.getMessage())
        logger = logging.getLogger("tests.zoo")
        logger.addHandler(handler)
        try:
            with warnings.catch_warnings(record=True) as caught, torch.no_grad(), \
                    contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                warnings.simplefilter("always")
                value = fn(*ex_args, **ex_kwargs)
        finally:
            logger.removeHandler(handler)
        results.append((value, out.getvalue(), records, [str(w.message) for w in caught]))
    return results


def test_every_zoo_case_is_covered():
    assert set(EXPECTED_OPS) | set(UNFIXABLE) == set(CASES)


def _dynamo_graphs(program) -> int:
    """Graphs torch.compile makes of the exported graph (scalar reads captured, as the
    exported graph holds them)."""
    from capture import explain
    from stitch.synthesize.convert.censuses import CAPTURE_HINTS

    module = copy.deepcopy(program.exported_program.module())
    args, kwargs = program.examples[0].args, program.examples[0].kwargs
    with torch._dynamo.config.patch(**dict.fromkeys(CAPTURE_HINTS, True)):
        return explain(lambda *a, **k: module(*a, **k), args, kwargs).graph_count


@pytest.mark.parametrize("name", sorted(EXPECTED_OPS))
def test_one_graph_with_expected_ops(name):
    program = zoo_program(name)
    report = program.report
    # a break inside a loop over layers: Dynamo runs the rest of the frame in Python, so
    # the model was one graph and then eager, not two graphs
    assert report.breaks_before >= 1
    assert report.graphs_before >= (1 if name in RUNS_REST_IN_PYTHON else 2)
    assert report.graphs_after == 1 and report.breaks_after == 0, str(report)
    # an independent count: torch.compile re-traces the stitched graph as ONE Dynamo graph
    assert _dynamo_graphs(program) == 1, str(report)
    for op, count in EXPECTED_OPS[name].items():
        assert report.graph_ops.get(op, 0) >= count, str(report)
    assert isinstance(program.exported_program, torch.export.ExportedProgram)


@pytest.mark.parametrize("name", sorted(EXPECTED_OPS))
def test_matches_eager_on_every_example(name):
    for args, kwargs in CASES[name].inputs():
        (expected, out_e, logs_e, warns_e), (actual, out_a, logs_a, warns_a) = \
            run_eager_and_program(name, args, kwargs)
        for e, a in zip(pytree.tree_leaves(expected), pytree.tree_leaves(actual), strict=True):
            torch.testing.assert_close(a, e)
        assert out_a == out_e and logs_a == logs_e and warns_a == warns_e


@pytest.mark.parametrize("name", ["branch_on_item", "branch_on_tensor", "flag_then_branch",
                                  "elif_chain", "and_or_predicate",
                                  "early_return", "buffer_in_branch", "print_in_branch"])
def test_examples_drive_both_sides_of_every_branch(name):
    """The census (independent of the rewrite) shows the examples take each side."""
    census = zoo_census(name)
    conds = census.condition_map
    sides: dict[str, set[str]] = {}
    for ex in census.examples:
        for loc, taken in ex.branches(conds):
            sides.setdefault(loc, set()).add(taken)
    first = min(sides)  # the first data-dependent if in the source
    assert sides[first] == {"then", "else"}, sides


def test_side_effects_replay_with_same_text():
    (_, out_e, _, _), (_, out_a, _, _) = run_eager_and_program("print_stats", *CASES["print_stats"].inputs()[0])
    assert out_a == out_e and out_a.startswith("hidden mean: tensor(")
    (_, _, logs_e, _), (_, _, logs_a, _) = run_eager_and_program("log_warning", *CASES["log_warning"].inputs()[0])
    assert logs_a == logs_e and logs_a[0].startswith("hidden norm ")
    (_, _, _, w_e), (_, _, _, w_a) = run_eager_and_program("warns_user", *CASES["warns_user"].inputs()[0])
    assert w_a == w_e == ["WarnsUser is deprecated"]


def test_print_in_branch_replays_only_when_branch_ran():
    program = zoo_program("print_in_branch")
    printed = []
    for args, kwargs in CASES["print_in_branch"].inputs():
        (_, out_e, _, _), (_, out_a, _, _) = run_eager_and_program("print_in_branch", args, kwargs)
        assert out_a == out_e
        printed.append(bool(out_a))
    assert printed.count(True) >= 1 and printed.count(False) >= 1
    assert program.epilogue.entries[0].guard is not None


def test_assert_raises_original_type_and_message():
    huge = torch.full((4, 16), 1e9)
    with pytest.raises(AssertionError, match="^activations overflowed$"):
        make("assert_finite")[0](huge)
    with pytest.raises(AssertionError, match="^activations overflowed$"):
        fresh_program("assert_finite")(huge)
    assert fresh_program("assert_finite")(torch.randn(4, 16)).shape == (4, 16)
    nan = torch.full((4, 16), float("nan"))
    with pytest.raises(ValueError, match="^NaN in hidden state$"):
        make("raise_on_nan")[0](nan)
    with pytest.raises(ValueError, match="^NaN in hidden state$"):
        fresh_program("raise_on_nan")(nan)


def test_loop_trip_count_is_data():
    program = zoo_program("tensor_counted_loop")
    model = make("tensor_counted_loop")[0]
    x = torch.randn(4, 16)
    for n in (0, 1, 5):
        torch.testing.assert_close(program(x, torch.tensor(n)), model(x, torch.tensor(n)))


def test_buffer_mutation_matches_eager_sequence():
    model = make("buffer_in_branch")[0]
    fresh = fresh_program("buffer_in_branch")
    for args, kwargs in CASES["buffer_in_branch"].inputs() * 2:
        torch.testing.assert_close(fresh(*args, **kwargs), model(*args, **kwargs))
    buffers = dict(fresh._module.named_buffers())
    torch.testing.assert_close(buffers["model.hits"], model.hits)
    torch.testing.assert_close(buffers["model.running"], model.running)


@pytest.mark.parametrize("name, kind", sorted(UNFIXABLE.items()))
def test_unfixable_sites_are_exported_as_written_when_torch_export_takes_them(name, kind):
    """No rewrite removes these breaks, but torch.export takes the model as written: never
    worse than torch.export, stitch returns that program (verified), naming the site."""
    model, args, kwargs, examples = make(name)
    torch.export.export(copy.deepcopy(model), args, kwargs)  # the premise
    program = stitch.export(model, args, kwargs, examples=examples)
    if FIRST in program.report.notes:  # taken as written before any census: no sites
        assert name in FIRST_TAKEN and program.report.graphs_before is None
        return
    (decision,) = [d for d in program.report.decisions if d.action == TAKEN[name]]
    (site,) = [s for s in program.report.sites if s.location == decision.location]
    assert site.kind.value == kind
    if TAKEN[name] == Action.AS_WRITTEN:
        assert any("as written" in n for n in program.report.notes)
    for a, k in [(args, kwargs or {}), *[(e[0], e[1]) for e in examples or []]]:
        torch.testing.assert_close(program(*a, **k), model(*a, **k))


def test_report_lists_every_census_site_with_a_decision():
    for name in EXPECTED_OPS:
        report = zoo_program(name).report
        decided = {d.location for d in report.decisions}
        for site in report.sites:
            assert site.location in decided, (name, site.location, str(report))
        assert report.checks and all(c.max_abs_error <= 1e-4 for c in report.checks)


def test_model_untouched_by_export():
    model = make("buffer_in_branch")[0]
    before = {k: v.clone() for k, v in model.state_dict().items()}
    forward = type(model).forward
    args, kwargs = CASES["buffer_in_branch"].inputs()[0]
    stitch.export(model, args, kwargs)
    assert type(model).forward is forward
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k])


class WritesItsInputs(torch.nn.Module):
    def forward(self, x, seen: dict):
        x[0].add_(1)
        seen["calls"] = seen.get("calls", 0) + 1
        return x * 2 if x.sum() > 0 else x


def test_the_callers_inputs_untouched_by_export():
    """stitch runs the model on copies of the inputs: a forward that writes its input
    tensor in place, or a dict it is given, leaves the caller's as they were (each of the
    analysis runs added 1 to ``x[0]``)."""
    x, other, seen = torch.ones(2, 3), -torch.ones(2, 3), {}
    before = (x.clone(), other.clone())
    try:
        stitch.export(WritesItsInputs(), (x, seen), examples=[((other, {}), {})])
    except stitch.StitchError:
        pass  # refused or not, the inputs are the caller's as given
    assert torch.equal(x, before[0]) and torch.equal(other, before[1]) and seen == {}


def test_side_the_examples_miss_is_forced_and_verified():
    """nested_encoder's examples all take the `then` side; verification forces `else`."""
    census = zoo_census("nested_encoder")
    taken = {t for ex in census.examples for _, t in ex.branches(census.condition_map)}
    assert taken == {"then"}
    checks = {c.what for c in zoo_program("nested_encoder").report.checks}
    assert "S1 forced false" in checks


# every zoo case stitch fixes without deferring a side effect (strict export refuses those)
STRICT_CASES = sorted(set(EXPECTED_OPS) - {"print_stats", "log_warning", "warns_user",
                                           "print_in_branch", "effects_in_nested_branches"})


def _forced(program) -> set[str]:
    return {c.what for c in program.report.checks if "forced" in c.what}


@pytest.mark.parametrize("name", STRICT_CASES)
def test_strict_export_same_graph_and_values(name):
    """strict=True (Dynamo traces the rewritten model) gives the ops strict=False gives,
    forces the same branch sides, and matches eager on every example."""
    program = zoo_program(name, strict=True)
    assert program.report.graphs_after == 1
    assert program.report.graph_ops == zoo_program(name).report.graph_ops, str(program.report)
    for op, count in EXPECTED_OPS[name].items():
        assert program.report.graph_ops.get(op, 0) >= count, str(program.report)
    assert _forced(program) == _forced(zoo_program(name))
    model = make(name)[0]
    program = fresh_program(name, strict=True)
    for args, kwargs in CASES[name].inputs():
        with torch.no_grad():
            torch.testing.assert_close(program(*args, **kwargs), model(*args, **kwargs))
        got = {k.removeprefix("model."): v for k, v in program._module.named_buffers()}
        for k, want in model.named_buffers():  # state moves the same way, call after call
            torch.testing.assert_close(got[k], want)


def test_strict_export_refuses_side_effects_clearly():
    model, args, kwargs, examples = make("print_stats")
    with pytest.raises(stitch.UnsupportedSideEffectError, match="strict=True cannot defer"):
        stitch.export(model, args, kwargs, examples=examples, strict=True)


@pytest.mark.parametrize("spec", ["tuple", "dict"])
def test_dynamic_batch_dimension(spec):
    model, args, kwargs, examples = make("branch_on_tensor")
    batch = torch.export.Dim("batch", min=2, max=64)
    shapes = ({0: batch},) if spec == "tuple" else {"x": {0: batch}}
    program = stitch.export(model, args, kwargs, examples=examples, dynamic_shapes=shapes)
    for n in (3, 9):
        for sign in (1.0, -1.0):
            x = torch.full((n, 16), 100.0 * sign)
            with torch.no_grad():
                torch.testing.assert_close(program(x), model(x))
