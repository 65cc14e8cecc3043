"""The strategies an export tries, in their declared order: the first program is kept and its
report lists every attempt; where none gives one, the main strategy's refusal is raised with
the attempts noted; an error a strategy does not pass on is raised at once."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import stitch
from stitch import pipeline
from stitch.errors import ExportFailedError, InputError, StitchError, VerificationError
from stitch.report import Report
from stitch.strategies import Left, Strategy, first_program


class _Attempt:
    refusal = None


class _Program:
    def __init__(self, name: str, inner: tuple[str, ...] = ()) -> None:
        self.name = name
        self.report = Report(None, None, 1, 0, (), (), strategies=inner)


def _fails(error):
    def run(attempt):
        raise error
    return run


def test_the_first_program_is_kept_and_every_attempt_listed():
    ran: list[str] = []

    def made(name):
        return lambda attempt: ran.append(name) or _Program(name)

    strategies = (
        Strategy("a", "", _fails(Left("nothing to do")), passes_on=(StitchError,)),
        Strategy("skipped", "", made("skipped"), when=lambda a: False),
        Strategy("b", "", _fails(ExportFailedError("torch.export said no")), main=True,
                 passes_on=(ExportFailedError,)),
        Strategy("c", "", made("c"), when=lambda a: a.refusal is not None),
        Strategy("d", "", made("d")),
    )
    program = first_program(strategies, _Attempt())
    assert program.name == "c" and ran == ["c"]  # d never runs, "skipped" did not apply
    assert program.report.strategies == (
        "a: left (nothing to do)", "b: refused (ExportFailedError: torch.export said no)",
        "c: kept")


def test_a_program_made_by_running_the_list_again_lists_that_run_too():
    inner = ("as written: left (why)", "converted: kept")
    strategies = (Strategy("m", "", _fails(VerificationError("differs")), main=True,
                           passes_on=(VerificationError,)),
                  Strategy("again", "", lambda a: _Program("x", inner)))
    program = first_program(strategies, _Attempt())
    assert program.report.strategies == (
        "m: refused (VerificationError: differs)", "again: kept",
        "again > as written: left (why)", "again > converted: kept")


def test_where_none_gives_a_program_the_main_refusal_is_raised_with_the_attempts():
    main = VerificationError("the program differs")
    strategies = (
        Strategy("first", "", _fails(Left("not quiet")), passes_on=(StitchError,)),
        Strategy("main", "", _fails(main), main=True, passes_on=(VerificationError,)),
        Strategy("retry", "", _fails(main), passes_on=(VerificationError,)),
        Strategy("other", "", _fails(ExportFailedError("also no")),
                 passes_on=(ExportFailedError,)),
    )
    with pytest.raises(VerificationError) as refused:
        first_program(strategies, _Attempt())
    assert refused.value is main
    assert refused.value.__notes__ == [
        "tried, in order: first: left (not quiet); main: refused (VerificationError: the "
        "program differs); retry: no program (what its tries met is in the message above); "
        "other: refused (ExportFailedError: also no)"]


def test_an_error_a_strategy_does_not_pass_on_is_raised_at_once():
    ran: list[str] = []
    strategies = (
        Strategy("main", "", _fails(InputError("bad input")), main=True,
                 passes_on=(VerificationError,)),
        Strategy("never", "", lambda a: ran.append("never")),
    )
    with pytest.raises(InputError, match="bad input"):
        first_program(strategies, _Attempt())
    assert ran == []


# -- the pipeline's own list -------------------------------------------------------------

class Quiet(nn.Module):
    def forward(self, x):
        return x.relu() + 1


class ReadsData(nn.Module):
    """torch.export refuses it as written (a slice bound read from data): the first
    strategy leaves it to the converted one."""

    def forward(self, x):
        n = int((x > 0).sum())
        return x[:n] * 2


class Breaks(nn.Module):
    def forward(self, x):
        print("sum", x.sum().item())  # says something: no as-written attempt first
        if x.sum() > 0:
            return x * 2
        return x - 1


def _x(seed: int, n: int = 6):
    return torch.randn(n, generator=torch.Generator().manual_seed(seed))


def test_a_quiet_model_is_kept_as_written_by_the_first_strategy():
    program = stitch.export(Quiet(), (_x(0),), examples=[((_x(1, 7),), {})])
    assert program.report.strategies == ("as written: kept",)
    assert "strategies tried:\n  as written: kept" in str(program.report)
    assert program.report.to_json()["strategies"] == ["as written: kept"]


def test_the_converted_strategy_follows_the_first_where_that_is_left():
    program = stitch.export(ReadsData(), (_x(0),), examples=[((_x(1, 7),), {})])
    first, converted = program.report.strategies
    assert first.startswith("as written: left (ExportFailedError: ")
    assert converted == "converted: kept"


def test_a_model_that_prints_goes_to_the_converted_strategy(capsys):
    program = stitch.export(Breaks(), (_x(0),), examples=[((-_x(0).abs(),), {})])
    assert program.report.strategies == ("converted: kept",)


def test_the_declared_order():
    assert [s.name for s in pipeline.STRATEGIES] == [
        "as written", "converted", "as written, after the converted program",
        "tracing probes as in eager", "reads pinned", "partial"]
    assert [s.name for s in pipeline.STRATEGIES if s.main] == ["converted"]


def test_pinned_reads_reuse_the_converted_strategys_census(monkeypatch):
    """Dynamo reads as always under the pins: each pinned try takes the census the
    converted strategy took, not a new one."""
    from tests.stitch.test_pinned_reads import Segments, _inputs

    calls: list[int] = []
    census_of = pipeline.census_of
    monkeypatch.setattr(pipeline, "census_of",
                        lambda *a, **k: calls.append(1) or census_of(*a, **k))
    program = stitch.export(Segments().eval(), _inputs(0), examples=[(_inputs(1), {})],
                            settings=stitch.Settings(allow_guards=True))
    assert calls == [1]
    converted, as_written = program.report.strategies[1:3]
    assert converted.startswith("converted: refused (")
    assert as_written.startswith("as written, after the converted program: left (")
    assert any(s.startswith("reads pinned: kept") for s in program.report.strategies)
    assert "reads pinned > converted: kept" in program.report.strategies
