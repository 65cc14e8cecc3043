"""A rewrite round's census is a torch.compile of the rewritten model on every example, the
largest part of an export's time; none is taken that cannot tell anything new."""

from __future__ import annotations

import pytest
import torch

from capture import CaptureError
from stitch.synthesize.convert import censuses as rounds

HOP = ("torch.compile failed on example 0 although the model runs eagerly: "
       "UncapturedHigherOrderOpError: This higher order operator doesn't work unless it is "
       "captured completely with torch.compile. Got graph break/error: Unsupported "
       "Tensor.item() call with capture_scalar_outputs=False")


class Example:
    args, kwargs = (), {}


class Census:
    sites = ()


def _failing_on(example: int):
    error = CaptureError(HOP.replace("example 0", f"example {example}"))
    error.example = example
    return error


@pytest.fixture
def calls(monkeypatch):
    """The census's compiles, each with its capture flags; it fails on an arm's scalar
    read while scalars are not captured, as Dynamo does."""
    made = []

    def explain(work, args, kwargs, examples=(), timeline=True):
        scalars = torch._dynamo.config.capture_scalar_outputs
        made.append((len(examples) + 1, scalars))
        if not scalars:
            raise _failing_on(0)
        return Census()

    monkeypatch.setattr(rounds, "explain", explain)
    return made


def test_a_census_that_fails_on_example_0_is_not_taken_again_on_it_alone(calls):
    with pytest.raises(CaptureError):
        rounds._census(None, [Example(), Example()])
    assert calls == [(2, False)]


def test_a_census_failing_on_a_later_example_is_taken_on_example_0(monkeypatch):
    made = []

    def explain(work, args, kwargs, examples=(), timeline=True):
        made.append(len(examples) + 1)
        if examples:
            raise _failing_on(1)
        return Census()

    monkeypatch.setattr(rounds, "explain", explain)
    assert isinstance(rounds._census(None, [Example(), Example()]), Census)
    assert made == [2, 1]


def test_an_arm_asking_for_capture_is_censused_once_more_with_it(calls):
    census, needed = rounds.round_census(None, [Example(), Example()])
    assert isinstance(census, Census) and needed
    assert calls == [(2, False), (2, True)]  # no census without capture in between


def test_a_later_round_starts_with_capture_on(calls):
    census, needed = rounds.round_census(None, [Example(), Example()], scalars=True)
    assert isinstance(census, Census) and not needed
    assert calls == [(2, True)]


def test_a_failed_census_is_not_taken_again_where_capture_was_already_on(monkeypatch):
    """``census_of`` takes a failed census again without data-dependent capture. Under a
    caller's config that already captures (``round_census`` with capture turned on) that
    census would run exactly as the failed one did: it is not taken."""
    made = []

    def explain(work, args, kwargs, examples=(), timeline=True):
        config = torch._dynamo.config
        made.append((config.capture_dynamic_output_shape_ops, config.capture_scalar_outputs))
        raise CaptureError("torch.compile failed on example 0 although the model runs "
                           "eagerly: AssertionError: Expected bool, got FakeTensor(...)")

    monkeypatch.setattr(rounds, "explain", explain)
    with pytest.raises(CaptureError), torch._dynamo.config.patch(
            capture_dynamic_output_shape_ops=True, capture_scalar_outputs=True):
        rounds.census_of(None, [Example()], capture_scalars=True)
    assert made == [(True, True)]
    made.clear()
    with pytest.raises(CaptureError):  # capture off outside: the census without it differs
        rounds.census_of(None, [Example()], capture_scalars=True)
    assert made == [(True, True), (False, False)]


def test_a_census_that_needed_capture_says_so_where_it_fails_too(monkeypatch):
    """An arm asked for data-dependent capture, and the census with it on failed as well:
    the error says capture was needed, so the round's next census starts with it on
    (``rounds._loop``) instead of failing on the arm once more without it."""
    made = []

    def explain(work, args, kwargs, examples=(), timeline=True):
        scalars = torch._dynamo.config.capture_scalar_outputs
        made.append(scalars)
        if not scalars:
            raise _failing_on(0)
        raise CaptureError("torch.compile failed on example 0 although the model runs "
                           "eagerly: AssertionError: Expected bool, got FakeTensor(...)")

    monkeypatch.setattr(rounds, "explain", explain)
    with pytest.raises(CaptureError, match="Expected bool") as caught:
        rounds.round_census(None, [Example()])
    assert caught.value.capture_needed and made == [False, True]


def test_a_round_with_capture_on_takes_no_census_a_failed_one_already_was(monkeypatch):
    """A round that starts with capture on (``scalars``) whose census fails, then fails
    without capture on an arm that asks for it: the census with capture would be the first
    one again. Its failure is raised, saying capture was needed."""
    made = []

    def explain(work, args, kwargs, examples=(), timeline=True):
        config = torch._dynamo.config
        made.append((config.capture_dynamic_output_shape_ops, config.capture_scalar_outputs))
        if config.capture_scalar_outputs:  # its cause names the arm's line (the round's T site)
            raise CaptureError("torch.compile failed on example 0 although the model runs "
                               "eagerly: AssertionError: Expected bool, got FakeTensor(...)"
                               ) from AssertionError("model.py:985")
        raise _failing_on(0)

    monkeypatch.setattr(rounds, "explain", explain)
    with pytest.raises(CaptureError, match="Expected bool") as caught:
        rounds.round_census(None, [Example()], scalars=True)
    assert caught.value.capture_needed and str(caught.value.__cause__) == "model.py:985"
    assert made == [(True, True), (False, False)]


def _counted(monkeypatch, fail_export: int | None = None) -> list[str]:
    """The censuses and exports an export takes, in order; ``fail_export``: that export
    after the first census (counted from 1) raises instead, as an export of a rewrite that
    exposed a break would."""
    import capture
    from stitch import rewrite_export
    from stitch.errors import ExportFailedError

    made: list[str] = []
    census_of, export_model = capture.explain, rewrite_export.export_model

    def explain(*args, **kwargs):
        made.append("census")
        return census_of(*args, **kwargs)

    def exported(*args, **kwargs):
        made.append("export")
        if "census" in made and made[made.index("census"):].count("export") == fail_export:
            raise ExportFailedError("the rewritten model did not export")
        return export_model(*args, **kwargs)

    monkeypatch.setattr(rounds, "explain", explain)
    monkeypatch.setattr(rewrite_export, "export_model", exported)
    return made


def test_a_break_torch_export_finds_after_the_rounds_takes_one_more_round(monkeypatch):
    """The rounds go on from where they ended with the site torch.export found, in one more
    round: the rounds before it are not taken again from the first (each a census), and
    that round takes no census: the export of its rewrite is the trace that checks it."""
    from hostile_models import DeepensThenAsserts

    import stitch

    made = _counted(monkeypatch)
    torch.manual_seed(0)
    model = DeepensThenAsserts()
    program = stitch.export(model, (torch.randn(2, 4),), examples=[((torch.randn(2, 4),), {})])
    # the census; the first round's export with no census of it, which fails (its cond's
    # trace meets the inner `if`); the rounds again with their censuses: the first round's
    # twice (its cond's trace finds the inner `if`, and the round is taken again with it);
    # the export that finds the assert; one round for it (not the first round again, and no
    # census of it); the export
    assert made[made.index("census"):] == (["census", "export"] + ["census"] * 2
                                           + ["export", "export"])
    assert [d.site for d in program.report.decisions if d.site.endswith("E1")] == ["R2.E1"]
    x = torch.randn(2, 4)
    torch.testing.assert_close(program(x), model(x))
    with pytest.raises(AssertionError, match="activations blew up"):
        program(torch.full((2, 4), 1e7))


def test_where_the_round_without_a_census_fails_to_export_it_is_taken_with_one(monkeypatch):
    """The round for a site torch.export found, exported with no census of it, fails to
    export: the same round is taken again with its census, and that export stands."""
    from hostile_models import DeepensThenAsserts

    import stitch

    made = _counted(monkeypatch, fail_export=3)
    torch.manual_seed(0)
    model = DeepensThenAsserts()
    program = stitch.export(model, (torch.randn(2, 4),), examples=[((torch.randn(2, 4),), {})])
    # (the first export: the first round's, with no census of it, which fails)
    assert made[made.index("census"):] == (["census", "export"] + ["census"] * 2
                                           + ["export"] * 2 + ["census", "export"])
    assert [d.site for d in program.report.decisions if d.site.endswith("E1")] == ["R2.E1"]
    x = torch.randn(2, 4)
    torch.testing.assert_close(program(x), model(x))
    with pytest.raises(AssertionError, match="activations blew up"):
        program(torch.full((2, 4), 1e7))


class TwoBreaks(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            x = x + 1
        print("mean", x.mean())
        return x * 2


def test_a_round_census_runs_no_timeline_and_finds_the_same_sites():
    """The second compiled run under a line tracer gives the flow and timelines a report
    shows, nothing a round reads: a round's census leaves it out."""
    from capture.inputs import normalize

    model = TwoBreaks()
    inputs = normalize(model, (torch.randn(3, 4),), None, [((torch.randn(5, 4),), {})])
    full = rounds.census_of(model, inputs)
    census, _ = rounds.round_census(model, inputs)
    assert full.sites and "timeline" in full.seconds and "timeline" not in census.seconds
    assert [(s.location, s.kind) for s in census.sites] == \
        [(s.location, s.kind) for s in full.sites]
    assert [e.outcomes for e in census.examples] == [e.outcomes for e in full.examples]
