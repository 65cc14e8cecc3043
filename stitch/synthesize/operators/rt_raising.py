"""A branch one side of which raises whenever it is taken: a check, and the other side.

torch.cond cannot hold a ``raise``: Dynamo traces its arms, and an arm that raises fails
the trace (or fails earlier, on what the message formats: ``str + str`` of sizes, a SymInt
in an f-string). Whatever the spelling — ``if bad: raise E(...)``, a helper's
``if not ok: if raises: raise E(msg, shape=...)``, a message built over several lines —
the arm is a raise wherever the trace finds that it is one. So where the traced cond fails,
each arm is run on the fake operands, nothing traced into the graph: if one arm ends in a
``raise`` statement of the model's code and the other runs, the branch becomes

    check(not <predicate>, <the exception's type and message>)
    <the other arm, traced as straight-line code>

Where it holds: the probe decides whether the arm raises by running it. Python values and
sizes decide the same way at run time as in the probe, except a test on a dynamic size made
inside the raising arm, which the probe takes at the traced size without a guard (the
message of a size check formats sizes: ``expected {n} or 1``); an arm that raises or not by
such a size is taken to raise. An arm that holds a branch or loop of its own on data is not
decided (the probe stops there) and the cond's own error stands. The exception is the
model's class, made again from its message; a message that formats a value known only at
run time names it ``<value>``. Verification forces each side of the site as for any branch.
"""

from __future__ import annotations

import dis
import re
from collections.abc import Callable
from typing import Any

import torch

from ...epilogue.formatting import without_marks
from ...epilogue.stand_ins import current_recorder
from .rt_checks import check, encode_message
from .rt_state import RT
from .rt_symbolic import untraced_probe
from .site_marks import mark

_RAN = object()
_SYMBOL = re.compile(r"\b[su]\d+\b|FakeTensor\(")


class NestedDataBranch(Exception):
    """Raised inside a probe that met a branch or loop on data of its own."""


def raising_side(site: str, predicate: torch.Tensor, true_fn: Callable,
                 false_fn: Callable, operands: tuple) -> tuple | None:
    """The outputs of the arm that does not raise, traced, after a check that the raising
    one is not taken; None where not exactly one arm raises and the other runs."""
    probed = {side: _probe(fn, predicate, side, operands)
              for side, fn in ((True, true_fn), (False, false_fn))}
    raised = [side for side, r in probed.items() if isinstance(r, BaseException)]
    if len(raised) != 1 or probed[not raised[0]] is not _RAN:
        return None
    side, exc = raised[0], probed[raised[0]]
    text = _message(exc)
    try:
        type(exc)(text)  # the program raises the model's class, made from its message
    except Exception:  # noqa: BLE001 - a class that takes more than a message: not decided
        return None
    marked = mark(site, predicate)
    taken = marked if marked.dtype == torch.bool else marked.bool()
    check(site, torch.logical_not(taken) if side else taken, encode_message(text), type(exc))
    return tuple((false_fn if side else true_fn)(*operands))


def _probe(fn: Callable, predicate: Any, side: bool, operands: tuple) -> Any:
    """``_RAN``, the exception the model's own ``raise`` raised, or None (anything else, or
    an arm that made a call the export defers: a print, a log, an append)."""
    from capture.branch_asserts import as_arm

    recorder = current_recorder()
    recorded = _lengths(recorder)
    RT.raise_probe += 1
    try:
        with untraced_probe(operands):
            as_arm(fn, predicate, side, *operands)
        outcome: Any = _RAN
    except NestedDataBranch:
        outcome = None
    except Exception as e:  # noqa: BLE001 - the probe only decides; anything else is None
        outcome = e if _raised_by_model(e) else None
    finally:
        RT.raise_probe -= 1
    if recorder is not None and _lengths(recorder) != recorded:
        _forget(recorder, recorded)  # what the probe recorded is not the program's
        return None
    return outcome


def _lengths(recorder) -> tuple[int, ...] | None:
    if recorder is None:
        return None
    return len(recorder.entries), len(recorder.outputs), len(recorder.marks)


def _forget(recorder, lengths: tuple[int, ...]) -> None:
    entries, outputs, marks = lengths
    del recorder.entries[entries:], recorder.outputs[outputs:], recorder.marks[marks:]
    for index in [i for i in recorder._versions if i >= outputs]:
        del recorder._versions[index]


def _raised_by_model(exc: BaseException) -> bool:
    """Raised by a ``raise`` statement in the model's code (not by torch, not by an
    operation that failed on a fake value)."""
    from capture.source import is_user_file

    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    if not is_user_file(code.co_filename):
        return False
    return any(i.offset == tb.tb_lasti and i.opname == "RAISE_VARARGS"
               for i in dis.get_instructions(code))


def _message(exc: BaseException) -> str:
    """The exception's text, each value known only at run time (a size or a tensor as the
    trace sees it) written ``<value>``."""
    text = str(exc.args[0]) if len(exc.args) == 1 else str(exc) if exc.args else ""
    return _SYMBOL.sub("<value>", without_marks(text, "<value>"))
