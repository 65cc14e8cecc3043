"""A break a failed cond trace names on a continuation line of a test written over several
lines is the ``if`` (or ``assert``, ``while``) itself, by its first line: the rewrites know
statements by their first line, and a site on another line was never rewritten (the same
trace then failed again and the branch was guarded: PaliGemma's mask-skip helper)."""

import inspect

import torch

from capture import BreakKind
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
