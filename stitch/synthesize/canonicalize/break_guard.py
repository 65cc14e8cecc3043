"""``if <data-dependent>: break`` in a loop over a fixed sequence (early exit over layers,
stop once a score is reached) becomes a flag and ``if``s that ``branch_to_cond`` turns into
``torch.cond``::

    for layer in self.layers:             __stitch_go_1 = __stitch_rt__.go()
        h = layer(h)                      for layer in self.layers:
        if h.abs().mean() < tol:   ->         if __stitch_go_1:
            break                                 h = layer(h)
        h = self.norm(h)                          __stitch_stop_1 = h.abs().mean() < tol
                                                  if not __stitch_stop_1:
                                                      h = self.norm(h)
                                                  __stitch_go_1 = __stitch_rt__.keep_going(
                                                      __stitch_stop_1)

Exact: an iteration runs while no earlier one broke; the statements before the ``if`` run,
then either what the ``if`` holds before its ``break`` or the rest of the body. The flag
starts as Python ``True``, so the first iteration runs as written (no cond on a constant);
after it the flag is the test's negation, a 0-d bool tensor when the test is data, and every
later iteration's ``if`` is a cond. The loop itself stays a Python loop: only loops over a
fixed sequence (a ``ModuleList``, ``range`` of a constant) — a loop counted by data is
``loop_to_while``'s and keeps its refusal of ``break``. Only a ``break`` that ends the body
of an ``if`` on a data-dependent line at the top level of the loop body, no ``else`` on
either, and no other ``break``/``continue``/``return`` in the loop.
"""

from __future__ import annotations

import ast

from ...plan import Action
from ..analysis.context import RewriteContext
from ..analysis.names import (
    bound_before,
    contains,
    name,
    path_to,
    reads_after,
    rt,
    rt_call,
    statement_blocks,
    stored_names,
    walk_local,
)
from ..analysis.origins import negated, origin_of
from ..analysis.truth import boolean


def breaks_to_flags(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    data_loops = ctx.loop_lines()
    for block in list(statement_blocks(func.body)):
        i = 0
        while i < len(block):
            node = block[i]
            at = (_breaking_if(node, ctx) if isinstance(node, ast.For)
                  and node.lineno not in data_loops else None)
            if at is not None:
                n = ctx.next_id()
                # a loop whose ``return`` became this ``break`` reads the flag after it
                flag = getattr(node, "_stitch_go_flag", None) or f"__stitch_go_{n}"
                start = ast.copy_location(ast.Assign([name(flag, True)], rt_call("go")), node)
                kept = _targets_read_after(node, func)
                unbound = _bound_in_body_only(node, func)
                _rewrite(node, at, flag, ctx)
                before, after = _last_targets(node, kept, n)
                before += [ast.copy_location(ast.Assign([name(u, True)], rt("UNBOUND")), node)
                           for u in unbound]
                block[i:i + 1] = [start, *before, node, *after]
                i += 1 + len(before) + len(after)
            i += 1


def _bound_in_body_only(loop: ast.For, func: ast.FunctionDef) -> list[str]:
    """Names the loop body binds that are unbound before the loop (``logits`` computed in
    each iteration and read after it). From the second iteration, where the flag makes the
    body a cond, they hold the previous iteration's value, which the cond carries to the
    side that skips the body; before the loop they are ``UNBOUND`` (the first iteration
    runs as written and binds them; a read of ``UNBOUND`` raises)."""
    targets = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
    before = bound_before(func, loop)
    return [a for a in dict.fromkeys(stored_names(loop.body))
            if a not in before and a not in targets and not a.startswith("__stitch_")]


def _targets_read_after(loop: ast.For, func: ast.FunctionDef) -> list[str]:
    """The loop variables read after the loop: by line, and in the statements that follow
    it in each enclosing block (a statement a rewrite placed there keeps a line inside the
    loop: ``returns_in_loops``), the whole body of an enclosing loop included."""
    targets = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
    later: list[ast.stmt] = []
    for block, index in path_to(func.body, loop) or []:
        later += block[index + 1:]
    for node in walk_local(func.body):  # an enclosing loop runs what precedes it again
        if isinstance(node, ast.For | ast.While) and node is not loop \
                and loop in walk_local(node.body):
            later += node.body
    read = {n.id for n in walk_local(later)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in targets}
    return sorted(read | {n.id for n in reads_after(loop, func, targets)})


def _last_targets(loop: ast.For, kept: list[str], n: int) -> tuple[list, list]:
    """The rewritten loop runs every iteration (the flag only skips the bodies), so its
    variables end at the last item, not the one the model broke at (``return x, depth``).
    Each variable read after the loop is copied at the start of every iteration that runs
    (under the flag) and set back from the copy after the loop. The first iteration always
    runs, so the copy holds an item before any cond carries it."""
    if not kept:
        return [], []
    shadow = {t: f"__stitch_go_at_{t}_{n}" for t in kept}  # carried, as the flag
    before = [ast.copy_location(ast.Assign([name(shadow[t], True)], ast.Constant(None)), loop)
              for t in kept]
    guard = loop.body[0]
    guard.body[:0] = [ast.copy_location(ast.Assign([name(shadow[t], True)], name(t)), guard)
                      for t in kept]
    after = [ast.copy_location(ast.Assign([name(t, True)], name(shadow[t])), loop)
             for t in kept]
    for stmt in after:
        stmt.lineno = stmt.end_lineno = loop.end_lineno or loop.lineno
    return before, after


def _breaking_if(loop: ast.For, ctx: RewriteContext) -> int | None:
    return leaving_if(loop, ctx, ast.Break)


def leaving_if(loop: ast.For, ctx: RewriteContext, leave: type) -> int | None:
    """The index, in ``loop.body``, of the one ``if <dependent>: ...; <leave>`` (a ``break``
    this pass rewrites; a ``return`` that ``returns_in_loops`` makes one), no other jump in
    the loop."""
    if loop.orelse:
        return None
    found = [i for i, s in enumerate(loop.body)
             if isinstance(s, ast.If) and s.lineno in ctx.dependent_lines and not s.orelse
             and s.body and isinstance(s.body[-1], leave)]
    if len(found) != 1:
        return None
    i = found[0]
    rest = loop.body[:i] + loop.body[i].body[:-1] + loop.body[i + 1:]
    if contains(rest, ast.Break, ast.Continue, ast.Return, ast.Yield, ast.YieldFrom):
        return None
    return i


def _rewrite(loop: ast.For, i: int, flag: str, ctx: RewriteContext) -> None:
    stop = loop.body[i]
    # the model's breaking test, before it becomes the flag; only ``break`` under it
    work = len(stop.body) > 1
    origin = None if work else origin_of(stop)
    label = ctx.label(stop)  # the breaking test's site, found while the test is the model's
    stopped = f"__stitch_stop_{flag.rsplit('_', 1)[-1]}"  # synthetic: not carried out
    # ``not``/``and``/``or`` of tensors kept as tensors (Python's would call bool() on data)
    # (a test on sizes: its numbers stay predicates, as branch_to_cond keeps them)
    test = ast.copy_location(ast.Assign([name(stopped, True)], boolean(
        stop.test, sizes=ctx.is_size_test(stop.lineno))), stop)
    stop.test = name(stopped)
    stop.body = stop.body[:-1]
    stop.orelse = loop.body[i + 1:]
    if stop.orelse:
        stop.end_lineno = stop.orelse[-1].end_lineno
    kept = [stop] if stop.body or stop.orelse else []
    if not kept:  # no cond of its own at this line: say what became of it
        ctx.decide(Action.COND, stop, f"`if <data>: break` in a loop over a fixed sequence: "
                   f"a flag set from the test; the later iterations run under torch.cond "
                   f"at line {loop.lineno} (break_guard)")
    if not stop.body:  # ``if t: break`` with a rest: the rest runs when ``t`` is false
        stop.test = rt_call("logical_not", name(stopped))
        stop.body, stop.orelse = stop.orelse, []
    after = ast.copy_location(
        ast.Assign([name(flag, True)], rt_call("keep_going", name(stopped))), stop)
    guard = ast.If(test=name(flag), body=loop.body[:i] + [test, *kept, after], orelse=[])
    ast.copy_location(guard, loop)
    guard.lineno = loop.lineno  # the loop's line: a data-dependent if for branch_to_cond
    guard.end_lineno = loop.end_lineno
    ctx.dependent_lines.add(loop.lineno)
    # the guard is the breaking test's site (not one its lines hold: an `if` before the
    # test); with work before the break, a site of its own: the test's true side runs the
    # work and breaks, the guard's true side goes on, so neither may stand for the other
    stop._stitch_label = label
    guard._stitch_label = label + (".go" if work else "")
    if origin is not None and getattr(loop, "_stitch_go_flag", None) is None:
        # (a flag read after the loop, a ``return`` made a ``break``: forcing the guard
        # forces no flag the test set, so no model state matches it; forced against the
        # rewrite only, as a branch stitch built)
        # the guard (and the rest's ``if not stopped``) take their true side exactly where
        # the model's test is false: forcing the model's test is forcing them (a body before
        # the ``break`` would not be: it runs on the test's true side, the guard's false)
        for node in (guard, *kept):
            negated(node, origin)
    loop.body = [guard]
