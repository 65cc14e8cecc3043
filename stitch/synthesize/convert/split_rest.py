"""The rest of a function after a loop whose branch gives a name two structures, made a
function that runs once per structure (``operators/rt_split.py``).

    extra = None                                  extra = None
    for layer in self.layers:                     for layer in self.layers:
        h = layer(h)                                  ...                # the cond, carried
        if h.sum() > 0:                   ->      def __stitch_rest_2(extra, h):
            extra = h.mean(0)                         return h if extra is None else h + extra
    return h if extra is None else h + extra      return __stitch_rt__.split_rest(
                                                      "S1.rest", __stitch_rest_2, (extra, h))

A branch in a loop (a ``try`` or a ``with``) cannot take the rest of the function into its
arms: the loop goes on after it. Its names come out as ``Alternatives``
(``cond_keywords.carried_to_outputs``), and a use inside the program refuses.
The rest after the loop's top-level statement is the first place with one structure per
side again: it becomes a function of the names it reads, and the operator runs it once per
side. Left as it was where the rest only returns the names (the outputs carry them) or
where it has effects a cond arm cannot hold (they would be traced once per side).
"""

from __future__ import annotations

import ast

from ...plan import Action
from ..analysis.context import RewriteContext
from ..analysis.names import (
    bound_before,
    function_def,
    is_rt_call,
    located,
    name,
    path_to,
    rt_call,
    stored_names,
    tuple_of,
    walk_local,
)
from .branch_effects import bound_names, effect_calls
from .cond_keywords import carried_to_outputs, used_beyond_return

# runtime calls that change state outside the values a cond arm returns
_STATEFUL = ("cond_effects", "write_back", "write_into", "set_state", "add_state",
             "set_item_state", "set_item", "in_place")


def carried_out(node: ast.If, func: ast.FunctionDef, anchor: ast.stmt, names: list[str],
                ctx: RewriteContext) -> bool:
    """Whether the names the branch ``node`` (at ``anchor``) assigns may be carried out of
    it in two structures (``cond_keywords.carried_to_outputs``). Where the branch sits in a
    loop, ``try`` or ``with`` of ``func``'s top level, that statement is noted: the rest
    after it is split on them (``split_rests``)."""
    if not (ctx.to_outputs and carried_to_outputs(func, anchor, names, node)):
        return False
    path = path_to(func.body, anchor) if func is ctx.func else None
    if path is None or len(path) < 2 or all(isinstance(block[i], ast.If)
                                           for block, i in path[:-1]):
        return True
    top = func.body[path[0][1]]
    ctx.split_after.setdefault(id(top), (top, ctx.label(node), []))[2].extend(names)
    return True


def split_rests(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    """The rest of ``func`` after each noted statement, last first, as a function the
    runtime splits (``rt_split.split_rest``)."""
    noted = [(func.body.index(top), top, label, names)
             for top, label, names in ctx.split_after.values()
             if any(s is top for s in func.body)]
    for index, top, label, names in sorted(noted, key=lambda n: -n[0]):
        rest = func.body[index + 1:]
        wanted = list(dict.fromkeys(names))
        if not rest or not used_beyond_return(rest, set(wanted)) or _stateful(rest, ctx):
            continue
        n = ctx.next_id()
        before = bound_before(func, rest[0])
        params = list(dict.fromkeys(wanted + [s for s in stored_names(rest) if s in before]))
        fn = function_def(f"__stitch_rest_{n}", params, rest)
        call = rt_call("split_rest", ast.Constant(f"{label}.rest"), name(fn.name),
                       tuple_of(params))
        func.body[index + 1:] = [located(fn, rest[0]), located(ast.Return(call), rest[0])]
        ctx.decide(Action.COND, rest[0],
                   f"the rest of the function after line {top.lineno} runs once per "
                   f"structure the data gives {', '.join(f'`{w}`' for w in wanted)} "
                   f"(a torch.cond on the side the branch at {label} took)")


def _stateful(rest: list[ast.stmt], ctx: RewriteContext) -> bool:
    """``rest`` makes an effect call (print, log, warn, an append that outlives the call, a
    helper that makes one: ``branch_effects.effect_calls``), writes state or yields: a cond
    arm traced once per side cannot hold it."""
    if effect_calls(rest, ctx.warn_names, bound_names(ctx.func), ctx.helpers):
        return True
    local = set(stored_names(rest))
    for node in walk_local(rest):
        if isinstance(node, ast.Yield | ast.YieldFrom | ast.Global | ast.Nonlocal | ast.Await):
            return True
        if is_rt_call(node, *_STATEFUL):
            return True
        if isinstance(node, ast.Attribute | ast.Subscript) and isinstance(node.ctx, ast.Store):
            root = node.value
            while isinstance(root, ast.Attribute | ast.Subscript):
                root = root.value
            if not (isinstance(root, ast.Name) and root.id in local):
                return True
    return False
