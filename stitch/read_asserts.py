"""Values read from data only to be asserted on: a graph traced as written keeps them.

torch.export (non-strict) traces an ``assert`` without a message on a number read from data
(``assert lengths.max().item() <= slen``, XLM's) into a run-time check in the graph,
``_assert_scalar``, instead of failing on the data-dependent test. Such a read is no break
for torch.export, so the model exports as written and needs no census or rewrite. Two things
kept that program from being taken before the census (``plain_export.as_written_first``):

- the read's value: the rewrites keep Python's number rules on values read from data, which
  a graph traced as written does not. Here the value is only compared (``<=``, ``max``),
  which gives the same answer on the graph's int64 or double as on Python's numbers;
- the failure: torch's check raises ``RuntimeError: Runtime assertion failed for expression
  u0 <= 128``, the model ``AssertionError``. Each such check becomes a stitch check, as a
  rewritten assert's is: ``_assert_async`` on the test's truth, with the text of
  ``rt_checks.check_text``, so the program raises the model's ``AssertionError``
  (``running.original_exception``) on every backend.

So a read is taken as written only where every use of it, through comparisons and
``max``/``min``, ends in ``_assert_scalar``, and each of those checks is one torch made of
an ``assert`` statement: while the model is traced (``python_asserts``), each test torch
turns into a check because the bytecode after it is a message-less ``assert``
(``ShapeEnv._is_python_assert``) is recorded with the model's line, and the check's message
must name that test's expression. Anything else (an ``assert`` with a message, which torch
traces as a guard and fails on; ``torch._check``, which raises RuntimeError in eager too)
reads data: the census and the rewrites take the model.
"""

from __future__ import annotations

import contextlib
import contextvars
import operator
import re
import sys
from collections.abc import Iterator

import torch
from torch.fx.experimental.symbolic_shapes import ShapeEnv, uninteresting_files

from capture import branch_asserts
from capture.reentrant import Reentrant

from .synthesize.operators.rt_checks import check_text

ASSERT = torch.ops.aten._assert_scalar.default
# what a value read from data may pass through on its way to a check: no arithmetic
COMPARED = {operator.le, operator.lt, operator.ge, operator.gt, operator.eq, operator.ne,
            torch.sym_max, torch.sym_min, torch.sym_not, operator.and_, operator.or_}
_TESTED = re.compile(r"Runtime assertion failed for expression (.+) on node '[^']+'$")
_ORIGINAL = ShapeEnv._is_python_assert
_PATCH = Reentrant()
# each test traced as a message-less assert (its expression) -> the model's file:line
_DEFERRED: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "stitch_python_asserts", default=None)


@contextlib.contextmanager
def python_asserts() -> Iterator[dict[str, str]]:
    """While the model is traced: the tests torch turns into run-time checks because they
    are message-less ``assert`` statements, by expression (the dict yielded)."""
    found: dict[str, str] = {}
    token = _DEFERRED.set(found)
    # torch finds the model's frame (the ``assert`` after the test) by skipping the files it
    # lists as its own; stitch's frames between (this patch, capture/branch_asserts.py's
    # ShapeEnv patches) are skipped too while the model is traced here
    ours = {__file__, branch_asserts.__file__} - uninteresting_files()
    uninteresting_files().update(ours)
    try:
        with _PATCH.active((ShapeEnv, "_is_python_assert", _recorded)):
            yield found
    finally:
        _DEFERRED.reset(token)
        uninteresting_files().difference_update(ours)


def _recorded(self) -> bool:
    asserted = _ORIGINAL(self)
    found = _DEFERRED.get()
    if asserted and found is not None:
        # the test as torch's caller holds it: the check's message names the same expression
        tests = sys._getframe(1).f_locals
        frame = self._get_user_frame()
        where = f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else "?"
        for name in ("expr", "orig_expr"):
            if tests.get(name) is not None:
                found[str(tests[name])] = where
    return asserted


def asserted_only(graph: torch.fx.Graph, reads: list[torch.fx.Node], asserts: dict[str, str]
                  ) -> list[torch.fx.Node] | None:
    """The ``_assert_scalar`` nodes the ``reads`` (nodes of values read from data) end in,
    where they are the reads' only ends and each checks a message-less ``assert`` of the
    model's (``asserts``: from ``python_asserts``); None where a read is used otherwise."""
    checks: dict[torch.fx.Node, None] = {}
    seen: set[torch.fx.Node] = set()
    todo = list(reads)
    while todo:
        node = todo.pop()
        for user in node.users:
            if user in seen:
                continue
            seen.add(user)
            if user.op == "call_function" and user.target is ASSERT:
                checks[user] = None
            elif user.op == "call_function" and user.target in COMPARED:
                todo.append(user)
            else:
                return None
    if not checks or any(_tested(c) not in asserts for c in checks):
        return None
    return list(checks)


def as_model_checks(gm: torch.fx.GraphModule, checks: list[torch.fx.Node],
                    asserts: dict[str, str]) -> list[str]:
    """Each check (``asserted_only``'s, in the graph module that holds them) raises the
    model's ``AssertionError`` when it fails, and is a check on a tensor, as a rewritten
    assert's is (``rt_checks.run_check``): ``_assert_async`` on the test's truth, which every
    backend keeps (ONNX as an output, lower/onnx_checks.py; its exporter drops
    ``_assert_scalar``). Returns the model's lines they check (``asserts``: from
    ``python_asserts``)."""
    lines = sorted({asserts[_tested(c)] for c in checks})
    fake = torch._guards.detect_fake_mode(
        [n.meta["val"] for n in gm.graph.nodes if isinstance(n.meta.get("val"), torch.Tensor)])
    for i, check in enumerate(checks, 1):
        text = check_text(f"A{i}", "AssertionError", "")
        with gm.graph.inserting_before(check):
            truth = gm.graph.call_function(torch.ops.aten.scalar_tensor.default,
                                           (check.args[0],), {"dtype": torch.bool})
            checked = gm.graph.call_function(torch.ops.aten._assert_async.msg, (truth, text))
        if fake is not None:
            with fake:
                truth.meta["val"] = torch.ones((), dtype=torch.bool)
        checked.meta.update({k: v for k, v in check.meta.items() if k != "val"})
        gm.graph.erase_node(check)
    gm.recompile()
    return lines


def _tested(check: torch.fx.Node) -> str | None:
    """The expression a check's message names (torch's message for a deferred test)."""
    message = check.args[1] if len(check.args) > 1 and isinstance(check.args[1], str) else ""
    match = _TESTED.match(message)
    return match.group(1) if match else None
