"""A branch whose sides still differ at the function's return takes the rest of the *caller*.

When a cond's sides give a name values of different kinds or ranks (FSMT's and Bamba's
``if not mask.any(): mask = None``, a mask ``None`` on one side) and that name is
returned, no cond inside the function can hold them, not even with the rest of the
function in each arm (``continuation.py``, case 3). The caller's rest often makes them
agree again: it only tests ``mask is not None`` and returns tensors. Continuation-passing
across the return carries it there, exactly, one frame at a time:

    def make_mask(ids):                        def make_mask(ids, *, __stitch_k__=None):
        m = ids.eq(1)                              m = ids.eq(1)
        if not m.any():                            if not m.any():
            m = None                                   m = None
        return m                                   return (__stitch_k__(m)
                                                           if __stitch_k__ is not None else m)

    def forward(self, ids, h):                 def forward(self, ids, h):
        mask = make_mask(ids)                      def __stitch_rest_19(__stitch_v__, h=h, self=self):
        y = self.attn(h, mask)         ->              mask = __stitch_v__
        return y * 2                                   y = self.attn(h, mask)
                                                       return y * 2
                                                   return make_mask(ids, __stitch_k__=__stitch_rest_19)

The callee (``takes_rest``) returns through ``__stitch_k__`` when its caller passes one and
as before otherwise; the continuation cases of ``continuation.py`` then copy that return into
each arm, so each arm of the cond runs the caller's rest with its own value. The caller's
statements after the call (through the enclosing ``if`` blocks, innermost first) become the
nested ``__stitch_rest_<line>``; the names they read that were bound before the call are
its parameters' defaults (bound when the call is made, as the rest would have seen them).
A caller whose own return still differs passes the rest on to its caller the same way
(``rewrite_rounds`` climbs the failing site's call chain one frame per attempt).

A call inside a larger expression (``out = self.regroup(rows).reshape(n, 6)``) splits the
statement there: what it evaluates before the call is bound to names first, in order
(``eval_order.py``), and the rest starts with the statement reading the callee's value.
A callee reached under a local name (``mask_interface = REGISTRY[kind]`` then
``mask_interface(...)``) is the call when it is the statement's only call. A name the rest
reads that may be unbound when the call is made (bound in an ``if`` on a Python flag)
defaults to ``locals().get(name, UNBOUND)`` and is deleted again at the rest's start where
it was unbound, so a read raises as the original would.

Refused (the branch then stays refused or guarded, as before): a call inside a loop,
``with`` or ``try`` block, one of several calls of the callee in one statement, a call
evaluated only on some paths of its statement (``and``/``or``, ``if``/``else``), a
statement that does more than assign, return or evaluate the call, a rest holding zero-argument
``super()``, ``yield``, ``global``/``nonlocal``, and a function that is a generator.
"""

from __future__ import annotations

import ast
import copy

from ...plan import Action
from ..analysis.context import RewriteContext, RewriteRefused
from ..analysis.names import (
    bound_before,
    contains,
    ends_in_exit,
    located,
    name,
    path_to,
    rt,
    stored_names,
    surely_bound,
    walk_local,
)
from ..canonicalize.eval_order import hoisted_before

K = "__stitch_k__"  # the continuation a caller passes (keyword-only, None by default)
V = "__stitch_v__"  # the callee's return value, inside the caller's rest
FOLLOW = "cannot follow"  # in the reason a call's rest was not passed (rounds reports it)


def returns_to_continuation(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    """First pass: ``func`` takes ``__stitch_k__`` and returns through it when given."""
    if not ctx.takes_rest:
        return
    if contains(func.body, ast.Yield, ast.YieldFrom):
        raise RewriteRefused(f"{func.name} is a generator: its caller's rest cannot follow it")
    if K not in {a.arg for a in func.args.kwonlyargs}:
        func.args.kwonlyargs.append(ast.arg(K))
        func.args.kw_defaults.append(ast.Constant(None))
    for node in list(walk_local(func.body)):
        if isinstance(node, ast.Return) and _tail_call(node, ctx):
            # ``return g(...)`` of a callee that takes the rest: it passes ours on
            node.value.keywords.append(ast.keyword(K, name(K)))
            ctx.tail_calls.add(node.lineno)
        elif isinstance(node, ast.Return):
            node.value = _resumed(node.value or ast.Constant(None), node)
    if not ends_in_exit(func.body):
        tail = ast.Return(_resumed(ast.Constant(None), func.body[-1]))
        func.body.append(located(tail, func.body[-1]))


def _tail_call(node: ast.Return, ctx: RewriteContext) -> bool:
    """``return callee(...)`` at a line whose call takes the rest of this function."""
    value = node.value
    return isinstance(value, ast.Call) and any(
        node.lineno <= line <= (node.end_lineno or node.lineno) and called_name(value) == callee
        for line, callee in ctx.rest_calls.items())


def _resumed(value: ast.expr, like: ast.AST) -> ast.expr:
    """``(__stitch_k__(value) if __stitch_k__ is not None else value)``."""
    test = ast.Compare(name(K), [ast.IsNot()], [ast.Constant(None)])
    call = ast.Call(name(K), [value], [])
    return located(ast.IfExp(test, call, copy.deepcopy(value)), like)


def calls_with_rest(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    """Last pass: each call at a line of ``ctx.rest_calls`` hands the rest of ``func`` to
    the callee as its continuation."""
    for line, callee in sorted(ctx.rest_calls.items(), reverse=True):
        if _passed_on(line, ctx):
            continue  # a tail call that passes this function's own continuation on
        try:
            _pass_rest(func, line, callee, ctx)
        except RewriteRefused as e:  # the callee's branch stays refused (or guarded)
            ctx.rest_refused.add(line)
            ctx.decide(Action.LEFT, located(ast.Pass(), func), f"line {line}: the rest of "
                       f"{ctx.qualname} {FOLLOW} {callee}'s return: {e}")


def _passed_on(line: int, ctx: RewriteContext) -> bool:
    return line in ctx.tail_calls


def _pass_rest(func: ast.FunctionDef, line: int, callee: str, ctx: RewriteContext) -> None:
    stmt, call = _call_statement(func, line, callee)
    path = _enclosing(func, stmt)
    rest: list[ast.stmt] = []
    for block, index in reversed(path):
        rest += block[index + 1:]
    block, index = path[-1]
    bindings, resumed, call = _with_value(stmt, call, line, _locals(func))
    body = [resumed, *rest]
    _check_rest(body, func)
    _check_bindings(func, stmt, body)
    fn_name = f"__stitch_rest_{line}"
    temps = [b.targets[0].id for b in bindings]
    reads, unsure = _bound_reads(func, stmt, body, set(temps))
    rest_fn = _rest_def(fn_name, reads + [t for t in temps if t not in reads], body, unsure)
    call.keywords.append(ast.keyword(K, name(fn_name)))
    block[index:] = [*bindings, located(rest_fn, stmt), located(ast.Return(call), stmt)]
    ctx.decide(Action.COND, stmt, f"the branch of {callee} that gives its return values of "
               f"different kinds on its two sides takes the rest of {ctx.qualname} from "
               "here into each arm (continuation across the return)")


def _call_statement(func: ast.FunctionDef, line: int, callee: str):
    """The simple statement at ``line`` and the one call of ``callee`` in it."""
    for node in walk_local(func.body):
        if not isinstance(node, ast.Assign | ast.AnnAssign | ast.Return | ast.Expr):
            continue
        if not (node.lineno <= line <= (node.end_lineno or node.lineno)):
            continue
        every = [c for c in walk_local([node]) if isinstance(c, ast.Call)]
        calls = [c for c in every if called_name(c) == callee]
        if not calls and len(every) == 1 and _through_a_name(every[0]):
            # the callee reached under another name (``mask_interface = REGISTRY[kind]``,
            # then ``mask_interface(...)``): the statement's only call is the frame's call
            calls = every
        if len(calls) != 1:
            raise RewriteRefused(f"line {line} calls {callee} {len(calls)} times; one call "
                                 "per statement can take the rest of the function")
        return node, calls[0]
    raise RewriteRefused(f"no plain statement at line {line} calls {callee} (inside a "
                         "rewritten branch, or a compound statement)")


def _through_a_name(call: ast.Call) -> bool:
    """A call of a function a local name holds (not an attribute: a method's own name)."""
    return isinstance(call.func, ast.Name)


def called_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def _enclosing(func: ast.FunctionDef, stmt: ast.stmt) -> list[tuple[list[ast.stmt], int]]:
    """(block, index) from ``func.body`` down to ``stmt``, through ``if`` blocks only."""
    path = path_to(func.body, stmt)
    if path is None:
        raise RewriteRefused("the call is not a statement of the function itself")
    for block, index in path[:-1]:
        outer = block[index]
        if not isinstance(outer, ast.If):
            raise RewriteRefused(f"the call sits in a `{type(outer).__name__.lower()}` block "
                                 f"(line {outer.lineno}); only `if` blocks can be split there")
    return path


def _params(args: ast.arguments) -> set[str]:
    own = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    return own | {a.arg for a in (args.vararg, args.kwarg) if a is not None}


def _locals(func: ast.FunctionDef) -> set[str]:
    """The caller's own names (what a callee cannot rebind): parameters and assigned names
    not declared ``global``/``nonlocal``."""
    own = _params(func.args)
    declared = {n for node in walk_local(func.body) if isinstance(node, ast.Global | ast.Nonlocal)
                for n in node.names}
    return (own | set(stored_names(func.body))) - declared


def _with_value(stmt: ast.stmt, call: ast.Call, line: int, local_names: set[str]
                ) -> tuple[list[ast.stmt], ast.stmt, ast.Call]:
    """(bindings, the statement with ``call`` replaced by the callee's value, the call as
    the rest is passed to it): what the statement evaluates before the call is bound to
    names first, in order (``eval_order``), so nothing that ran before the call runs after."""
    pairs, value, call = hoisted_before(stmt.value, call, f"__stitch_pre_{line}_", local_names,
                                        name(V))
    bindings = [located(ast.Assign([ast.Name(t, ast.Store())], e), stmt) for t, e in pairs]
    like = stmt
    if isinstance(stmt, ast.AnnAssign):
        stmt = ast.Assign([stmt.target], stmt.value)
    new = type(stmt)(**{f: getattr(stmt, f) for f in stmt._fields})
    new.value = value
    return bindings, located(new, like), call


def _check_rest(body: list[ast.stmt], func: ast.FunctionDef) -> None:
    for node in walk_local(body):
        # `with` (torch.no_grad()...): a block a cond's arm cannot keep around its outputs
        if isinstance(node, ast.Global | ast.Nonlocal | ast.Yield | ast.YieldFrom
                      | ast.With | ast.AsyncWith):
            raise RewriteRefused(f"the rest of {func.name} holds "
                                 f"`{type(node).__name__.lower()}` (line {node.lineno})")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "super" and not node.args:
            raise RewriteRefused(f"the rest of {func.name} calls super() without arguments "
                                 f"(line {node.lineno}); write super(Class, self)")


def _check_bindings(func: ast.FunctionDef, stmt: ast.stmt, body: list[ast.stmt]) -> None:
    """What the rest's parameters cannot carry: a name the call's own statement rebinds
    (``pad=(p := 1)``: the defaults are taken before the call), and a name the rest
    rebinds that a function or lambda made outside the rest reads (its closure would not
    see the rest's value)."""
    walrus = [n.target.id for n in walk_local([stmt]) if isinstance(n, ast.NamedExpr)]
    if walrus:
        raise RewriteRefused(f"the call's statement binds `{walrus[0]}` (`:=`)")
    stored = set(stored_names(body))
    inner = set(id(n) for n in ast.walk(ast.Module(body=body, type_ignores=[])))
    for node in ast.walk(func):
        if node is func or id(node) in inner or not isinstance(
                node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        captured = _free_names(node) & stored
        if captured:
            raise RewriteRefused(f"the rest rebinds `{sorted(captured)[0]}`, which a "
                                 f"function made before the call (line {node.lineno}) reads")


def _free_names(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    """Names a nested function reads from an enclosing scope (not its own)."""
    own = _params(fn.args)
    body = fn.body if isinstance(fn.body, list) else [ast.Expr(fn.body)]
    own |= set(stored_names(body))
    return {n.id for n in ast.walk(ast.Module(body=body, type_ignores=[]))
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - own


def _bound_reads(func: ast.FunctionDef, stmt: ast.stmt, body: list[ast.stmt],
                 hoisted: set[str]) -> tuple[list[str], set[str]]:
    """Names the rest reads that were bound before the call (``hoisted``: the call's own
    statement's, bound just before it): the rest's parameters; and those of them that may
    be unbound when the call is made (bound in an ``if`` no example needs to take)."""
    maybe = (bound_before(func, stmt) - _comprehension_only(func)) | hoisted
    read = {n.id for n in ast.walk(ast.Module(body=body, type_ignores=[]))
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}  # arms' reads too
    unsure = (read & maybe) - surely_bound(func, stmt) - hoisted - {V}
    return sorted(n for n in read & maybe if n != V), unsure


def _comprehension_only(func: ast.FunctionDef) -> set[str]:
    """Names bound only as comprehension variables (local to the comprehension)."""
    targets = {n.id for comp in ast.walk(func) if isinstance(comp, ast.comprehension)
               for n in ast.walk(comp.target) if isinstance(n, ast.Name)}
    elsewhere = {n.id for n in walk_local(func.body) if isinstance(n, ast.Name)
                 and isinstance(n.ctx, ast.Store) and not _in_comprehension(n, func)}
    return targets - elsewhere


def _in_comprehension(target: ast.Name, func: ast.FunctionDef) -> bool:
    return any(target in ast.walk(comp.target) for comp in ast.walk(func)
               if isinstance(comp, ast.comprehension))


def _rest_def(fn_name: str, params: list[str], body: list[ast.stmt],
              unsure: set[str] = frozenset()) -> ast.FunctionDef:
    """The rest as a function of the callee's value, each name it reads a parameter whose
    default is the name's value when the call is made. A name that may be unbound then
    defaults to ``locals().get(name, UNBOUND)`` and is deleted again at the rest's start
    where it was, so a read raises as the original function's would."""
    args = ast.arguments(posonlyargs=[], args=[ast.arg(V)] + [ast.arg(p) for p in params],
                         vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None,
                         defaults=[_value_or_unbound(p) if p in unsure else name(p)
                                   for p in params])
    unbind = [ast.If(ast.Compare(name(p), [ast.Is()], [rt("UNBOUND")]),
                     [ast.Delete([ast.Name(p, ast.Del())])], []) for p in sorted(unsure)]
    return ast.FunctionDef(name=fn_name, args=args, body=[*unbind, *body], decorator_list=[],
                           returns=None, type_params=[])


def _value_or_unbound(local: str) -> ast.expr:
    """``locals().get("<local>", __stitch_rt__.UNBOUND)``"""
    lookup = ast.Attribute(ast.Call(name("locals"), [], []), "get", ast.Load())
    return ast.Call(lookup, [ast.Constant(local), rt("UNBOUND")], [])
