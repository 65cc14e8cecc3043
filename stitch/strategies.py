"""Strategies: the ways stitch makes a program, tried in a declared order.

A strategy is data: its name, what it does, when it applies (a test on what the earlier
strategies found), and the errors that pass the turn to the next one. The first program a
strategy returns is the result; its report lists every attempt (``Report.strategies``).
Where none returns one, the main strategy's refusal is raised, each attempt noted on it
(``add_note``); an error a strategy does not pass on is raised at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from capture.errors import gist

from .errors import StitchError


class Left(StitchError):
    """A strategy gave no program, and nothing the user must read follows from it (why:
    the message); the next strategy takes over. ``met``: the refusal it met, where one did
    (a verification failure of the model as written), for the caller to examine."""

    def __init__(self, message: str, met: StitchError | None = None) -> None:
        super().__init__(message)
        self.met = (met,) if met is not None else ()


@dataclass(frozen=True)
class Strategy:
    name: str
    does: str  # one line: what the program is made from
    run: Callable[[Any], Any]  # the attempt -> a program, or raises
    when: Callable[[Any], bool] = lambda attempt: True
    passes_on: tuple[type[BaseException], ...] = (Left,)
    main: bool = False  # its refusal is the one raised where no strategy gives a program


@dataclass
class Tried:
    strategy: str
    outcome: str  # "kept", or why it was left

    def __str__(self) -> str:
        return f"{self.strategy}: {self.outcome}"


def first_program(strategies: tuple[Strategy, ...], attempt) -> Any:
    """The first program a strategy in ``strategies`` gives on ``attempt`` (its report
    listing the attempts), or the main strategy's refusal with the attempts noted and what
    each met on its ``met`` (``met_by_strategies``). ``attempt.refusal`` holds the main
    strategy's refusal for the strategies after it."""
    tried: list[Tried] = []
    met: list[StitchError] = []
    for strategy in strategies:
        if not strategy.when(attempt):
            continue
        try:
            program = strategy.run(attempt)
        except strategy.passes_on as error:
            met.extend(error.met if isinstance(error, Left) and error.met else (error,))
            if strategy.main:
                attempt.refusal = error
            tried.append(Tried(strategy.name, _why_left(error, attempt.refusal, strategy)))
            continue
        tried.append(Tried(strategy.name, "kept"))
        return _recorded(program, tried)
    refusal = attempt.refusal
    if refusal is None:  # no main strategy ran: the last one's reason stands
        refusal = StitchError("; ".join(map(str, tried)) or "no strategy applies")
    if len(tried) > 1:
        refusal.add_note("tried, in order: " + "; ".join(map(str, tried)))
    refusal.met = (*getattr(refusal, "met", ()), *(e for e in met if e is not refusal))
    raise refusal


def met_by_strategies(error: BaseException) -> tuple[BaseException, ...]:
    """``error`` and every refusal the strategies met before it was raised (a strategy
    that ran the list again contributes what its own run met)."""
    found, todo = [], [error]
    while todo:
        e = todo.pop(0)
        if any(e is f for f in found):
            continue
        found.append(e)
        todo.extend(getattr(e, "met", ()))
    return tuple(found)


def _why_left(error: BaseException, refusal: BaseException | None, strategy: Strategy) -> str:
    if isinstance(error, Left):
        return f"left ({error})"
    if strategy.main:
        return f"refused ({gist(error, 200)})"
    if error is refusal:  # the main refusal again, what the tries met added to it
        return "no program (what its tries met is in the message above)"
    return f"refused ({gist(error, 200)})"


def _recorded(program, tried: list[Tried]):
    """The program, its report listing the attempts; a program made by a strategy that ran
    the list again (under a context) lists that inner run's attempts after it."""
    report = getattr(program, "report", None)
    if report is not None:
        inner = tuple(f"{tried[-1].strategy} > {s}" for s in report.strategies)
        program.report = replace(report, strategies=(*map(str, tried), *inner))
    return program
