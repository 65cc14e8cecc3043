"""The passes, in the order they run on each function's AST (one place, one list)."""

from __future__ import annotations

import ast

from ..analysis.context import RewriteContext, RewriteRefused
from ..analysis.names import reads_number, statement_blocks, walk_local
from ..canonicalize.assert_to_check import asserts_to_checks
from ..canonicalize.bool_values import bool_values
from ..canonicalize.break_guard import breaks_to_flags
from ..canonicalize.container_writes import container_writes
from ..canonicalize.contiguous_copies import contiguous_copies
from ..canonicalize.continue_guard import continues_to_else
from ..canonicalize.dead_writes import dead_writes
from ..canonicalize.ifexp_statements import ifexps_to_statements
from ..canonicalize.len_to_size import lengths_to_sizes
from ..canonicalize.listed_folds import listed_folds
from ..canonicalize.percent_format import percent_formats
from ..canonicalize.raise_else import raises_then_rest
from ..canonicalize.returns_in_loops import returns_to_breaks
from ..canonicalize.scalar_to_tensor import scalar_reads_to_tensors
from ..canonicalize.slice_bounds import slice_bounds_to_ints
from ..canonicalize.torch_names import torch_spellings
from ..canonicalize.try_raises import raises_to_handlers
from ..canonicalize.while_true import while_true_to_test
from .bounded_while import bounded_whiles
from .branch_to_cond import branches_to_cond
from .caller_continuation import calls_with_rest, returns_to_continuation
from .continuation import takes_rest
from .loop_to_while import loops_to_while, row_loops
from .nonzero_loop import nonzero_loops
from .number_list import number_lists
from .number_ops import python_number_ops
from .split_map import split_maps

PASSES = (
    ("torch_names", torch_spellings),  # first: `th.cat`, `cat` from torch -> `torch.cat`
    ("ifexp_statements", ifexps_to_statements),  # `y = a if <data> else b` -> an if
    ("percent_format", percent_formats),  # `print("%.3f" % v)` -> text the epilogue formats
    ("listed_folds", listed_folds),  # `max(t.tolist())` -> the tensor's own reduction
    ("dead_writes", dead_writes),  # `steps.append(t)` into a list nothing reads -> `t`
    ("try_raises", raises_to_handlers),  # a raise its own try catches -> the handler
    ("raise_else", raises_then_rest),  # `if p: raise ... else: S` -> `if p: raise ...`, `S`
    ("arm_reads", lambda func, ctx: _mark_arm_reads(func, ctx)),  # once branches are ifs
    ("while_true", while_true_to_test),  # `while True: A; if p: break; B` -> a loop on p
    ("bounded_while", bounded_whiles),  # `while <data> and k < K:` with calls -> for + break
    ("returns_in_loops", returns_to_breaks),  # `return` in a loop -> a flag, `break`, `if`
    ("returns_to_continuation", returns_to_continuation),  # before a cond copies a return
    ("split_map", split_maps),  # split by sizes from data, map, cat -> one while_loop
    ("number_list", number_lists),  # a list grown by .tolist(): a tensor while traced
    ("nonzero_loop", nonzero_loops),  # first: its `if`s are branches for branch_to_cond
    ("continue_guard", continues_to_else),  # `if p: continue` -> an if over the rest
    ("break_guard", breaks_to_flags),  # `if p: break` over layers -> a flag and ifs
    ("loop_to_while", loops_to_while),  # before scalar reads: range() needs the raw stop
    ("bool_values", bool_values),  # `int(a and b)` of tensors: tensor-aware and/or/not
    ("scalar_to_tensor", scalar_reads_to_tensors),
    ("number_ops", python_number_ops),  # operators on reads: Python's number rules
    ("slice_bounds", slice_bounds_to_ints),  # tensors as slice bounds: symbolic ints
    ("len_to_size", lengths_to_sizes),  # len() of a tensor sized from data: its size
    ("contiguous_copies", contiguous_copies),  # no guard on a layout in a cond's arm
    ("assert_to_check", asserts_to_checks),
    ("row_loops", row_loops),  # `for row in x:` around a branch: a loop op, reads rewritten
    ("container_writes", container_writes),  # `d[k] = v` in an arm -> `d = {**d, k: v}`
    ("branch_to_cond", branches_to_cond),
    ("calls_with_rest", calls_with_rest),  # last: the rest it moves is rewritten already
)


def rewrite(func: ast.FunctionDef, ctx: RewriteContext) -> ast.FunctionDef:
    """The passes on ``func`` and, first, on each function defined inside it that holds a
    site (a helper ``def`` made on every call of forward: rewriting the enclosing function
    rewrites it)."""
    for inner in _nested_with_sites(func, set(ctx.sites)):
        _rewrite_one(inner, ctx)
    return _rewrite_one(func, ctx)


def _rewrite_one(func: ast.FunctionDef, ctx: RewriteContext) -> ast.FunctionDef:
    ctx.func = func
    for _name, run in PASSES:
        run(func, ctx)
    return func


def _nested_with_sites(func: ast.FunctionDef, lines: set[int]) -> list[ast.FunctionDef]:
    """Functions defined in ``func``'s body (at any depth, innermost first) whose lines hold
    one of ``lines``."""
    found = [node for node in ast.walk(func) if node is not func
             and isinstance(node, ast.FunctionDef)
             and any(node.lineno <= ln <= (node.end_lineno or node.lineno) for ln in lines)]
    return sorted(found, key=lambda node: -node.lineno)


__all__ = ["PASSES", "RewriteContext", "RewriteRefused", "rewrite"]


def _mark_arm_reads(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    """Scalar reads, asserts and ``range(<tensor>)`` loops inside the arms of data-dependent
    ifs: torch.cond traces every arm, also one no example ran."""
    for block in _blocks(func):
        for i, node in enumerate(block):
            if isinstance(node, ast.If) and node.lineno in ctx.dependent_lines:
                # a continuation makes the statements after the if part of each arm
                after = block[i + 1:] if takes_rest(node, func, ctx) else []
                _mark_reads_in(node.body + node.orelse + after, ctx)
    if ctx.rest_calls:  # the rest after a call that takes it runs in a callee's cond arms
        first = min(ctx.rest_calls)
        _mark_reads_in([s for s in func.body if (s.end_lineno or s.lineno) >= first], ctx)


def _blocks(func: ast.FunctionDef):
    """Every statement list of a function (not of nested functions or classes)."""
    yield from statement_blocks(func.body)


def _mark_reads_in(stmts: list[ast.stmt], ctx: RewriteContext) -> None:
    for inner in walk_local(stmts):
        if isinstance(inner, ast.Assert):
            ctx.arm_assert_lines.add(inner.lineno)
        if isinstance(inner, ast.For) and reads_number(inner.iter):
            ctx.arm_loop_lines.add(inner.lineno)
        elif isinstance(inner, ast.stmt) and not isinstance(inner, ast.For) \
                and reads_number(inner):
            ctx.arm_scalar_lines.add(inner.lineno)

