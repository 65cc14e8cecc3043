"""Breaks found while tracing, that the census could not see.

The census sees what the examples run and what Dynamo reports. When a rewritten branch
becomes a ``torch.cond``, Dynamo traces both arms, also an arm no example took, and a
data-dependent ``if`` or scalar read there (in a submodule only that arm calls, say) stops
the trace: ``UncapturedHigherOrderOpError`` with the user frames under "from user code:".
And torch.export (non-strict) evaluates in Python what Dynamo turned into graph ops without
a break (``assert x.abs().max() < 1e6``): "Could not guard on data-dependent expression",
with the user frame under "The following call raised this error:" — or, when torch.export
raised it from its ``__torch_function__`` hook, with no frames in the text, only in the
exception's traceback; or an op whose Python result is data (``torch.equal``:
``DataDependentOutputException``, known by its class). That innermost user frame is a break site like any other; the
pipeline rewrites it and tries again.
"""

from __future__ import annotations

import ast
import traceback

from torch._subclasses.fake_tensor import DataDependentOutputException

from . import torch_messages as tm
from .sites import BreakKind, BreakSite, FoundBy, has_ifexp, torch_assert
from .source import (
    assert_aliases,
    is_user_file,
    qualname_at,
    source_line,
    statement_at,
    statement_line,
)

# what Dynamo says when a traced branch reads a tensor into Python (an `assert <tensor
# expression>` in a traced branch), or sizes a value by data (a loop over `nonzero()`: a
# dynamic shape operator under torch.compile, a specialized integer under torch.export)
_MARKERS = (tm.DATA_DEPENDENT_BRANCHING, tm.GUARD_ON_DATA, tm.SPECIALIZED_INTEGER,
            tm.DYNAMIC_SHAPE_OPERATOR, tm.TENSOR_ITEM, tm.EXPECTED_BOOL_FAKE)
# a break under a context manager Dynamo cannot break in (GENERIC_CONTEXT_BREAK): the
# break's own message is lost, the frames still end at its line (kept only where that line
# is an if/for/assert)
_SECTIONS = (tm.USER_CODE_SECTION, tm.CALL_RAISED_SECTION)
RULES = {"T": "found while torch.cond traced a branch no example took",
         "E": "found while torch.export traced the model (Dynamo reported no break here)"}
FOUND_BY = {"T": FoundBy.COND_TRACE, "E": FoundBy.EXPORT}


def names_traced_break(error: BaseException | None) -> bool:
    """A failed cond trace in ``error``'s chain names a break site in user code."""
    while error is not None:
        if tm.matches(tm.HIGHER_ORDER_OP_ERROR, str(error)) and \
                break_named_by(error, "T", 0) is not None:
            return True
        error = error.__cause__
    return False


def break_named_by(error: BaseException | None, prefix: str, index: int) -> BreakSite | None:
    """The break site a failed trace names (its innermost user frame: a line of the user's
    function, also inside a branch stitch rewrote), or None when the error is of another
    kind, names no user code, or its line is not an ``if``, ``assert``, ``for``, ``while`` or
    scalar read. ``prefix`` + ``index`` make its id: ``T1`` (a cond's trace), ``E1`` (export's)."""
    text = str(error or "")
    marker = tm.first_found(_MARKERS, text)
    if marker is None and isinstance(error, DataDependentOutputException):
        # an op whose Python result is data (``torch.equal``), read under torch.export where
        # the census saw none (a frame Dynamo ran as Python: a break inside a ``try``)
        marker = f"an op whose Python result is data ({text})"
    section = tm.first_of(_SECTIONS, text)
    hidden = marker is None and tm.matches(tm.GENERIC_CONTEXT_BREAK, text)
    if marker is None and not hidden:
        return None
    if section is not None:
        frames = tm.frames(tm.split_at(section, text)[1])
    else:  # raised in Python under torch.export's hook: the traceback holds the frames
        frames = [(fr.filename, fr.lineno, fr.name)
                  for fr in traceback.extract_tb(error.__traceback__) if fr.lineno]
    user = [fr for fr in frames if is_user_file(fr[0])]
    if not user:
        return None
    filename, lineno, name = user[-1]
    statement = statement_at(filename, lineno)
    node = statement.node if statement else None
    if isinstance(node, ast.If):
        kind = BreakKind.BRANCH
    elif isinstance(node, ast.Assert) or isinstance(node, ast.Expr) and torch_assert(
            node, assert_aliases(filename)) is not None:  # ``torch._assert``, by any name
        kind = BreakKind.ASSERT
    elif isinstance(node, ast.For | ast.While):  # `while <tensor>:` as the census names it
        kind = BreakKind.LOOP
    elif has_ifexp(node):  # `y = a if t else b`: a branch in an expression
        kind = BreakKind.BRANCH
    elif not hidden and (tm.matches(tm.TENSOR_ITEM, marker) or node is not None):
        kind = BreakKind.SCALAR_READ
    else:
        return None
    lineno = statement_line(filename, lineno)  # a test over several lines: its statement's
    marker = marker or "a break inside a traced branch"
    return BreakSite(
        id=f"{prefix}{index}", kind=kind, rule=RULES[prefix], gb_type=marker,
        reason=f"{marker} ({RULES[prefix]})", filename=filename,
        lineno=lineno, source_line=source_line(filename, lineno),
        function=qualname_at(filename, lineno) or name, count=1,
        call_chain=tuple(f"{f}:{ln} in {n}" for f, ln, n in user), data_dependent=True,
        stopped_in=f"{filename}:{name}", found_by=FOUND_BY[prefix])


def cond_failed_at(error: BaseException | None) -> BreakSite | None:
    """The ``if`` whose ``torch.cond`` failed to trace, from the error a census raised (a
    cond Dynamo could not capture: "Got graph break/error: torch.cond: ..."), with torch's
    reason and the user frames that led there; None for any other error."""
    text = "".join(str(x) for x in (error, getattr(error, "__cause__", None)) if x is not None)
    found = tm.search(tm.COND_REFUSED, text)
    user_code = tm.split_at(tm.USER_CODE_SECTION, text)
    if found is None or user_code is None:
        return None
    user = [fr for fr in tm.frames(user_code[1]) if is_user_file(fr[0])]
    if not user:
        return None
    filename, lineno, name = user[-1]
    statement = statement_at(filename, lineno)
    if not isinstance(statement.node if statement else None, ast.If):
        return None
    lineno = statement.node.lineno  # the ``if``, whichever line of its test torch names
    return BreakSite(
        id="C", kind=BreakKind.BRANCH, rule="torch.cond failed to trace", gb_type="torch.cond",
        reason=tm.before(tm.EXPLANATION, found.group(1)).strip(), filename=filename,
        lineno=lineno,
        source_line=source_line(filename, lineno),
        function=qualname_at(filename, lineno) or name, count=1,
        call_chain=tuple(f"{f}:{ln} in {qualname_at(f, ln) or n}" for f, ln, n in user),
        data_dependent=True, stopped_in=f"{filename}:{name}", found_by=FoundBy.COND_TRACE)
