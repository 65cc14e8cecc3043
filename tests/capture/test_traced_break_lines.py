"""A break on a continuation line of a statement written over several lines is the statement
itself, by its first line (``capture.source.statement_line``), however it was found: a
failed cond trace names it, or the census. The rewrites know statements (and conditional
expressions) by their first line, and a site on another line was never rewritten (the same
trace then failed again and the branch was guarded: PaliGemma's mask-skip helper; a
``while`` or conditional expression over several lines would be refused where the same test
on one line is converted)."""

import inspect

import torch

from capture import BreakKind
from capture.explain import explain
from capture.source import statement_line
from capture.traced_breaks import break_named_by


def skips(mask, offset):
    if offset == 0 and (
        mask[:, :2].all() and (~mask[:, 2:]).all()
    ):
        return True
    assert (
        mask.any()
    ), "an empty mask"
    return False


def _line(text: str) -> int:
    source, start = inspect.getsourcelines(skips)
    return start + next(i for i, line in enumerate(source) if text in line)


def _trace_error(line: int) -> RuntimeError:
    """The text torch.compile's error gives for a break inside a traced cond arm."""
    return RuntimeError(
        "UncapturedHigherOrderOpError: Got graph break/error: Data-dependent branching\n\n"
        "from user code:\n"
        f'   File "{__file__}", line {line}, in skips\n'
        "    mask[:, :2].all() and (~mask[:, 2:]).all()\n")


def test_a_break_on_a_continuation_line_names_the_if():
    site = break_named_by(_trace_error(_line("mask[:, :2].all()")), "T", 1)
    assert site is not None and site.kind == BreakKind.BRANCH
    assert site.lineno == _line("if offset == 0"), (site.lineno, _line("if offset == 0"))
    assert site.id == "T1" and site.location.endswith(f":{_line('if offset == 0')}")


def test_an_assert_over_several_lines_is_named_by_its_first_line():
    site = break_named_by(_trace_error(_line("mask.any()")), "T", 2)
    assert site is not None and site.kind == BreakKind.ASSERT
    assert site.lineno == _line("assert ("), site


def test_a_one_line_statement_keeps_its_line():
    site = break_named_by(_trace_error(_line("return False")), "T", 3)
    assert site is not None and site.lineno == _line("return False")
    assert skips(torch.ones(1, 4, dtype=torch.bool), 1) is False


def wrapped(x, xs):
    y = (x * 2 if (
        x.sum() > 0
        and x.max().item() < 3.0
    ) else x - 1)
    total = sum(
        v.sum().item()
        for v in xs
    )
    out = torch.cat([
        y,
        x * x.mean().item(),
    ])
    return out, total


def _wrapped_line(text: str) -> int:
    source, start = inspect.getsourcelines(wrapped)
    return start + next(i for i, line in enumerate(source) if text in line)


def test_a_line_is_named_by_its_statement_or_conditional_expression():
    at = _wrapped_line
    # the test of a conditional expression: the expression's first line
    assert statement_line(__file__, at("x.sum() > 0")) == at("y = (x * 2 if (")
    assert statement_line(__file__, at("and x.max().item()")) == at("y = (x * 2 if (")
    # an argument of a call over several lines: the statement
    assert statement_line(__file__, at("x * x.mean().item()")) == at("out = torch.cat([")
    # inside a generator expression (a scope of its own): its own line
    assert statement_line(__file__, at("v.sum().item()")) == at("v.sum().item()")
    # a first line, and the if/assert of ``skips``, as the trace names them
    assert statement_line(__file__, at("return out")) == at("return out")
    assert statement_line(__file__, _line("mask[:, :2].all()")) == _line("if offset == 0")


class Halting(torch.nn.Module):
    def forward(self, h):
        k = 0
        while (
            h.sum() > 0
            and h.max().item() < 3.0
        ) and k < 3:
            h = h - 1.0
            k += 1
        return h


def test_the_census_names_a_loop_test_over_several_lines_by_the_while():
    source, start = inspect.getsourcelines(Halting.forward)
    loop = start + next(i for i, line in enumerate(source) if "while (" in line)
    census = explain(Halting(), (torch.ones(4, 8),))
    lines = {s.lineno for s in census.sites if s.kind in (BreakKind.LOOP, BreakKind.BRANCH)}
    assert lines == {loop}, [(s.kind, s.location) for s in census.sites]
