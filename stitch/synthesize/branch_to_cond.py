"""Data-dependent ``if`` statements become ``torch.cond`` (or ``torch.where``) calls.

    if h.sum() > 0:                          def __stitch_true_1(h):
        h = h * 2                                h = h * 2
    else:                              ->        return __stitch_rt__.fresh((h,))
        h = h - 1                            def __stitch_false_1(h):
                                                 h = h - 1
                                                 return __stitch_rt__.fresh((h,))
                                             (h,) = __stitch_rt__.cond("S1", <pred>,
                                                 __stitch_true_1, __stitch_false_1, (h,))

Names a branch assigns that were bound before the ``if`` are passed in as operands; other
names are read through the closure. ``elif`` chains are nested ``if``s (rewritten inner
first). A branch that returns takes the rest of the function with it (the rest is copied
into each arm that can fall through), and the ``if`` becomes ``return cond(...)[0]``.
``and``/``or``/``not`` between tensor predicates become logical ops that keep Python's
short-circuit for Python values. Attributes of ``self`` assigned in a branch (buffers) are
carried like names and written back after the cond. When the predicate turns out to be a
Python bool at run time, ``cond`` simply calls the branch: behaviour is unchanged.
"""

from __future__ import annotations

import ast
import copy

from ..plan import Action
from .branch_effects import effect_branch_fn, extract_effects, log_name, start_log
from .context import RewriteContext, RewriteRefused
from .continuation import lift_continuations, read_after
from .loop_to_while import loop_lines
from .names import (
    RT_NAME,
    SCOPES,
    bound_before,
    contains,
    ends_in_exit,
    function_def,
    located,
    name,
    rt_call,
    stored_names,
    tuple_of,
    walk_local,
)
from .runtime import encode_message

WHERE_MAX_NODES = 40
PURE_CALLS = frozenset({
    "abs", "exp", "log", "sqrt", "rsqrt", "relu", "sigmoid", "tanh", "sin", "cos", "neg",
    "clamp", "clamp_min", "clamp_max", "where", "maximum", "minimum", "pow", "square", "sign",
    "gelu", "silu", "softplus", "mul", "add", "sub", "div", "float", "half", "to",
})
FORBIDDEN = (ast.Break, ast.Continue, ast.Yield, ast.YieldFrom, ast.Await, ast.Global,
             ast.Nonlocal, ast.Try, ast.With)


def branches_to_cond(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    func.body = lift_continuations(func.body, func, ctx)
    func.body = _block(func.body, func, ctx)
    _ifexps(func, ctx)


# -- the rewrite --------------------------------------------------------------------------

def _is_dependent(node: ast.If, ctx: RewriteContext) -> bool:
    return node.lineno in ctx.dependent_lines


def _block(stmts: list[ast.stmt], func: ast.FunctionDef, ctx: RewriteContext,
           nested: bool = False) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for stmt in stmts:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.append(stmt)
            continue
        inner = nested or (isinstance(stmt, ast.If) and _is_dependent(stmt, ctx))
        for field_name in ("body", "orelse", "finalbody"):
            block = getattr(stmt, field_name, None)
            if block:
                setattr(stmt, field_name, _block(block, func, ctx, inner))
        if isinstance(stmt, ast.If) and _is_dependent(stmt, ctx):
            if stmt.lineno in ctx.force_guard and stmt.lineno in ctx.sides:
                out.extend(_guard(stmt, ctx, ctx.guard_reason))
                continue
            try:
                out.extend(_convert(copy.deepcopy(stmt), func, ctx, anchor=stmt))
            except RewriteRefused as e:
                if stmt.lineno in ctx.sides:
                    out.extend(_guard(stmt, ctx, f"torch.cond not possible: {e}"))
                else:
                    ctx.decide(Action.LEFT, stmt, f"if not rewritten: {e}")
                    out.append(stmt)
        else:
            out.append(stmt)
    return out


def _convert(node: ast.If, func: ast.FunctionDef, ctx: RewriteContext,
             anchor: ast.If) -> list[ast.stmt]:
    """Rewrite ``node`` (a copy of ``anchor``, the statement in ``func``'s tree: analyses of
    what is bound before and read after use the anchor's place)."""
    arms = node.body + node.orelse
    if contains(arms, *FORBIDDEN):
        bad = next(n for n in walk_local(arms) if isinstance(n, FORBIDDEN))
        raise RewriteRefused(f"a branch contains `{type(bad).__name__.lower()}`, which "
                             "torch.cond cannot express")
    left = sorted({f"{ctx.filename}:{n.lineno}" for n in walk_local(arms)
                   if isinstance(n, ast.For) and n.lineno in loop_lines(ctx)})
    if left:  # a Python loop over a tensor count cannot be traced inside a cond
        raise RewriteRefused(f"a branch holds a loop counted by a tensor that stays Python "
                             f"({', '.join(left)}; see that loop's decision)")
    n = ctx.next_id()
    label = ctx.label(node)
    pred_name = f"__stitch_pred_{n}"
    pred = ast.Assign(targets=[name(pred_name, True)], value=rt_call("pred", _boolean(node.test)))
    if contains(arms, ast.Return):
        return _convert_returning(node, n, label, pred, pred_name, func, ctx, anchor)
    _register_buffer_as_assignment(node.body)
    _register_buffer_as_assignment(node.orelse)
    inner_inplace = _lift_write_backs(node.body) | _lift_write_backs(node.orelse)
    arms = node.body + node.orelse
    attrs = _self_attributes(arms)
    inplace = inner_inplace | {t.target.attr for t in walk_local(arms)
                               if isinstance(t, ast.AugAssign)
                               and isinstance(t.target, ast.Attribute)}
    _localize_attributes(arms, attrs)
    _out_of_place(node.body)
    _out_of_place(node.orelse)
    effects = extract_effects(node, n, ctx)
    nested = _adopt_nested_effects(arms, n)
    assigned = [a for a in stored_names(node.body) + stored_names(node.orelse)
                if not _synthetic(a)]
    assigned = list(dict.fromkeys(assigned + [f"__stitch_attr_{a}" for a in attrs]))
    if not assigned and not effects and not nested:
        if _only_checks(node.body) and _only_checks(node.orelse):
            return _fold_checks(node, pred, pred_name, ctx)
        raise RewriteRefused("neither branch assigns anything (only side effects)")
    bound = bound_before(func, anchor) | {f"__stitch_attr_{a}" for a in attrs}
    params = [a for a in assigned if a in bound]
    in_true, in_false = set(stored_names(node.body)), set(stored_names(node.orelse))
    later = read_after(func, anchor)
    for a in list(assigned):
        if a not in bound and not (a in in_true and a in in_false):
            if a not in later:  # a temporary of one branch, dead after the if
                assigned.remove(a)
                continue
            raise RewriteRefused(f"`{a}` is assigned on one branch only and not bound before")
    if not assigned and not effects and not nested:
        raise RewriteRefused("neither branch assigns anything live after it")
    mode, why = _mode(node, assigned) if not (effects or nested) else ("cond", "torch.cond")
    if effects or nested:
        true_fn = effect_branch_fn(f"__stitch_true_{n}", params, node.body, assigned, n)
        false_fn = effect_branch_fn(f"__stitch_false_{n}", params, node.orelse, assigned, n)
        call, deferred = _cond_effects(node, label, pred_name, true_fn, false_fn, params,
                                       effects, ctx, nested)
        why += deferred
    else:
        true_fn = _branch_fn(f"__stitch_true_{n}", params, node.body, assigned)
        false_fn = _branch_fn(f"__stitch_false_{n}", params, node.orelse, assigned)
        call = rt_call("cond", ast.Constant(label), name(pred_name), name(true_fn.name),
                       name(false_fn.name), tuple_of(params), ast.Constant(mode))
    assign = ast.Assign(targets=[tuple_of(assigned, store=True)], value=call)
    before = [ast.Assign(targets=[name(f"__stitch_attr_{a}", True)],
                         value=ast.Attribute(name("self"), a, ast.Load())) for a in attrs]
    after = [ast.Expr(rt_call("write_back", name("self"), ast.Constant(a),
                              name(f"__stitch_attr_{a}"), ast.Constant(a in inplace)))
             for a in attrs]
    ctx.decide(Action.WHERE if mode == "where" else Action.COND, node,
               f"{why}; carries {', '.join(assigned)}"
               + (f"; buffers written back: {', '.join(attrs)}" if attrs else ""))
    return [located(s, node) for s in [pred, *before, true_fn, false_fn, assign, *after]]


def _is_check(s: ast.stmt) -> bool:
    return (isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
            and isinstance(s.value.func, ast.Attribute) and s.value.func.attr == "check"
            and isinstance(s.value.func.value, ast.Name) and s.value.func.value.id == RT_NAME)


def _is_pred(s: ast.stmt) -> bool:
    """``__stitch_pred_<n> = ...``: the predicate of a branch nested here that was folded
    into checks (pure: only the checks read it)."""
    return (isinstance(s, ast.Assign) and len(s.targets) == 1
            and isinstance(s.targets[0], ast.Name)
            and s.targets[0].id.startswith("__stitch_pred_"))


def _only_checks(block: list[ast.stmt]) -> bool:
    """Only runtime checks (asserts ``assert_to_check`` rewrote) in this block, also inside
    a nested branch already folded into checks or a Python-level ``if`` holding only
    checks."""
    return all(_is_check(s) or _is_pred(s)
               or (isinstance(s, ast.If) and _only_checks(s.body) and _only_checks(s.orelse))
               for s in block)


def _unless(skip: ast.expr, ok: ast.expr) -> ast.expr:
    """``skip or ok``, each operand a thunk (Python values keep their short-circuit)."""
    return rt_call("logical_or", _thunk(skip), _thunk(ok))


def _fold_checks(node: ast.If, pred: ast.stmt, pred_name: str, ctx) -> list[ast.stmt]:
    """``if p: assert ok`` -> ``assert (not p) or ok`` (``else`` arms: ``p or ok``): a check
    whose condition holds wherever the branch is not taken. No cond is needed; ``ok`` is
    evaluated either way (tensor ops, as the check itself). A nested branch folded before
    brings its predicate along, evaluated either way too; a Python-level ``if`` inside
    folds its test in as a thunk, evaluated only after the conditions around it hold, as
    in the model (for Python values)."""
    def fold(block, wrap) -> list[ast.stmt]:
        out = []
        for stmt in block:
            if _is_pred(stmt):
                out.append(stmt)
            elif isinstance(stmt, ast.If):
                test = _boolean(stmt.test)
                out += fold(stmt.body, lambda ok, t=test, w=wrap: w(_unless(
                    rt_call("logical_not", copy.deepcopy(t)), ok)))
                out += fold(stmt.orelse, lambda ok, t=test, w=wrap: w(_unless(
                    copy.deepcopy(t), ok)))
            else:
                call = copy.deepcopy(stmt.value)
                call.args[1] = wrap(call.args[1])
                out.append(ast.copy_location(ast.Expr(call), stmt))
        return out

    out = [pred]
    out += fold(node.body, lambda ok: _unless(rt_call("logical_not", name(pred_name)), ok))
    out += fold(node.orelse, lambda ok: _unless(name(pred_name), ok))
    ctx.decide(Action.CHECK, node, "a branch holding only checks: folded into the checks "
               "(`not p or ok`), no cond needed")
    return [located(s, node) for s in out]


def _convert_returning(node, n, label, pred, pred_name, func, ctx, anchor) -> list[ast.stmt]:
    if not (ends_in_exit(node.body) and ends_in_exit(node.orelse)):
        raise RewriteRefused("one branch returns and the other falls through to the end "
                             "of the function (it would return None)")
    effects = extract_effects(node, n, ctx)
    nested = _adopt_nested_effects(node.body + node.orelse, n)
    _register_buffer_as_assignment(node.body)
    _register_buffer_as_assignment(node.orelse)
    inplace = _lift_write_backs(node.body) | _lift_write_backs(node.orelse)
    arms = node.body + node.orelse
    attrs = _self_attributes(arms)
    inplace |= {t.target.attr for t in walk_local(arms) if isinstance(t, ast.AugAssign)
                and isinstance(t.target, ast.Attribute)}
    _localize_attributes(arms, attrs)
    _out_of_place(node.body)
    _out_of_place(node.orelse)
    carried = [f"__stitch_attr_{a}" for a in attrs]  # returned beside the value, written back
    bound = bound_before(func, anchor) | set(carried)
    params = [a for a in dict.fromkeys(stored_names(node.body) + stored_names(node.orelse)
                                       + carried)
              if a in bound and (not _synthetic(a) or a in carried)]
    logged = bool(effects or nested)
    true_fn = _returning_fn(f"__stitch_true_{n}", params, node.body, logged, n, carried)
    false_fn = _returning_fn(f"__stitch_false_{n}", params, node.orelse, logged, n, carried)
    why = ctx.continuations.get(
        node.lineno, "early return: the rest of the function became each branch's continuation")
    if logged:
        call, deferred = _cond_effects(node, label, pred_name, true_fn, false_fn, params,
                                       effects, ctx, nested)
        why += deferred
    else:
        call = rt_call("cond", ast.Constant(label), name(pred_name), name(true_fn.name),
                       name(false_fn.name), tuple_of(params))
    ctx.decide(Action.COND, node, why + (f"; buffers written back: {', '.join(attrs)}"
                                         if attrs else ""))
    if not attrs:
        ret = ast.Return(ast.Subscript(call, ast.Constant(0), ast.Load()))
        return [located(s, node) for s in [pred, true_fn, false_fn, ret]]
    result = f"__stitch_result_{n}"
    before = [ast.Assign(targets=[name(f"__stitch_attr_{a}", True)],
                         value=ast.Attribute(name("self"), a, ast.Load())) for a in attrs]
    after = [ast.Expr(rt_call("write_back", name("self"), ast.Constant(a),
                              ast.Subscript(name(result), ast.Constant(i + 1), ast.Load()),
                              ast.Constant(a in inplace)))
             for i, a in enumerate(attrs)]
    ret = ast.Return(ast.Subscript(name(result), ast.Constant(0), ast.Load()))
    return [located(s, node) for s in [pred, *before, true_fn, false_fn,
                                       ast.Assign(targets=[name(result, True)], value=call),
                                       *after, ret]]


def _adopt_nested_effects(arms: list[ast.stmt], n: int) -> int:
    """Branches with side effects nested in these arms (already rewritten, inner first)
    log their calls into this branch's log (``log=__stitch_fx_<n>``), which replays them
    in order, each guarded by its own flag. Returns how many there are."""
    calls = [c for c in walk_local(arms) if isinstance(c, ast.Call)
             and isinstance(c.func, ast.Attribute) and c.func.attr == "cond_effects"
             and isinstance(c.func.value, ast.Name) and c.func.value.id == RT_NAME
             and not any(k.arg == "log" for k in c.keywords)]
    for call in calls:
        call.keywords.append(ast.keyword("log", name(log_name(n))))
    return len(calls)


def _cond_effects(node, label, pred_name, true_fn, false_fn, params, effects,
                  ctx, nested: int = 0) -> tuple[ast.Call, str]:
    """The ``cond_effects`` call for a branch with side effects (its own ``effects``, and
    ``nested`` branches with side effects inside it), and what to add to the decision's
    reason."""
    specs = ast.Tuple([ast.Tuple([ast.Constant(kind), ast.Constant(arm), options,
                                  ast.Constant(where)], ast.Load())
                       for kind, arm, options, where in effects], ast.Load())
    call = rt_call("cond_effects", ast.Constant(label), name(pred_name), name(true_fn.name),
                   name(false_fn.name), tuple_of(params), specs)
    # the construct runs in Python under torch.compile by design: a break anywhere in its
    # span is expected (Dynamo names the line it was on when the branch ran)
    ctx.deferred_lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    own = (f"; {len(effects)} side effect(s) in the branches deferred to the epilogue, "
           "replayed only when their branch ran") if effects else ""
    inner = (f"; the side effects of {nested} branch(es) nested in it replay in order, "
             "each only when its own branch ran too") if nested else ""
    return call, own + inner


def _synthetic(name_: str) -> bool:
    """Helpers an inner rewrite introduced (its branch functions, predicate): not carried."""
    return name_.startswith("__stitch_") and not name_.startswith("__stitch_attr_")


_OPS = "__stitch_ops__"  # the branch's operands, kept so fresh() clones only their aliases


def _ops_stmt(params) -> ast.stmt:
    return ast.Assign(targets=[ast.Name(_OPS, ast.Store())], value=tuple_of(list(params)))


def _branch_fn(fn_name, params, body, outputs) -> ast.FunctionDef:
    ret = ast.Return(rt_call("fresh", tuple_of(outputs), ast.Name(_OPS, ast.Load())))
    return function_def(fn_name, params, [_ops_stmt(params), *(body or []), ret])


def _returning_fn(fn_name, params, body, effects=False, n=0, carried=()) -> ast.FunctionDef:
    """A returning arm: each ``return v`` becomes ``return fresh((v, *carried), ops)``
    (``carried``: the localised attributes the arms write); with side effects,
    ``return (fresh(...), log)``: the effect calls this arm made before returning
    (``branch_effects``)."""

    class Wrap(ast.NodeTransformer):
        def visit_FunctionDef(self, node):
            return node

        visit_Lambda = visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

        def visit_Return(self, node):
            value = node.value or ast.Constant(None)
            out = rt_call("fresh", ast.Tuple([value, *(name(c) for c in carried)], ast.Load()),
                          ast.Name(_OPS, ast.Load()))
            if effects:
                out = ast.Tuple([out, name(log_name(n))], ast.Load())
            return ast.copy_location(ast.Return(out), node)

    return function_def(fn_name, params, [_ops_stmt(params),
                                          *(start_log(n) if effects else []),
                                          *(Wrap().visit(s) for s in body)])


def _boolean(test: ast.expr) -> ast.expr:
    """``a and b`` / ``a or b`` / ``not a`` -> tensor-aware logical ops, short-circuit kept."""
    if isinstance(test, ast.BoolOp):
        op = "logical_and" if isinstance(test.op, ast.And) else "logical_or"
        lazies = [_thunk(_boolean(v)) for v in test.values]
        return rt_call(op, *lazies)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return rt_call("logical_not", _boolean(test.operand))
    return test


def _self_attributes(stmts) -> list[str]:
    out = []
    for node in walk_local(stmts):
        if (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name) and node.value.id == "self"):
            out.append(node.attr)
    return list(dict.fromkeys(out))


def _lift_write_backs(block: list[ast.stmt]) -> set[str]:
    """An if nested in this branch, already a cond, writes attributes back after it
    (``write_back(self, "a", v, inplace)``); inside this branch (traced by torch.cond, which
    forbids mutation) that becomes ``self.a = v`` again, so this cond carries ``a`` out and
    writes it back itself. Returns the attributes the inner writes updated in place."""
    inplace: set[str] = set()
    for i, stmt in enumerate(block):
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and call.func.attr == "write_back" and isinstance(call.func.value, ast.Name)
                and call.func.value.id == RT_NAME
                and isinstance(call.args[0], ast.Name) and call.args[0].id == "self"):
            attr, value, in_place = call.args[1].value, call.args[2], call.args[3].value
            target = ast.Attribute(name("self"), attr, ast.Store())
            block[i] = ast.copy_location(ast.Assign(targets=[target], value=value), stmt)
            if in_place:
                inplace.add(attr)
        for field_name in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(stmt, field_name, None)
            if isinstance(inner, list) and not isinstance(stmt, SCOPES):
                inplace |= _lift_write_backs(inner)
    return inplace


def _register_buffer_as_assignment(stmts) -> None:
    """``self.register_buffer("x", v, ...)`` in a branch -> ``self.x = v`` (the buffer exists;
    assignment rebinds it the same way, and can be carried out of a cond)."""
    for node in list(walk_local(stmts)):
        for field_name in ("body", "orelse"):
            block = node if isinstance(node, list) else getattr(node, field_name, None)
            if isinstance(block, list):
                _rewrite_register(block)
    _rewrite_register(stmts)


def _rewrite_register(block: list) -> None:
    for i, stmt in enumerate(block):
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and call.func.attr == "register_buffer"
                and isinstance(call.func.value, ast.Name) and call.func.value.id == "self"
                and len(call.args) >= 2 and isinstance(call.args[0], ast.Constant)):
            target = ast.Attribute(name("self"), call.args[0].value, ast.Store())
            block[i] = ast.copy_location(ast.Assign(targets=[target], value=call.args[1]), stmt)


def _localize_attributes(stmts, attrs: list[str]) -> None:
    """``self.steps`` -> ``__stitch_attr_steps`` (loads and stores) inside the arms."""
    for node in walk_local(stmts):
        for field_name, value in ast.iter_fields(node):
            items = value if isinstance(value, list) else [value]
            for i, item in enumerate(items):
                if (isinstance(item, ast.Attribute) and isinstance(item.value, ast.Name)
                        and item.value.id == "self" and item.attr in attrs):
                    replacement = ast.copy_location(name(f"__stitch_attr_{item.attr}",
                                                         isinstance(item.ctx, ast.Store)), item)
                    if isinstance(value, list):
                        value[i] = replacement
                    else:
                        setattr(node, field_name, replacement)


def _out_of_place(stmts) -> None:
    """``x += y`` -> ``x = x + y`` in branches: torch.cond forbids mutating its inputs."""
    blocks = [stmts] + [getattr(n, f) for n in list(walk_local(stmts)) for f in ("body", "orelse")
                        if isinstance(getattr(n, f, None), list)]
    for block in blocks:
        for i, stmt in enumerate(block):
            if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
                load = ast.Name(stmt.target.id, ast.Load())
                block[i] = ast.copy_location(ast.Assign(
                    targets=[ast.Name(stmt.target.id, ast.Store())],
                    value=ast.BinOp(load, stmt.op, stmt.value)), stmt)


def _mode(node: ast.If, assigned: list[str]) -> tuple[str, str]:
    """The cost rule: ``torch.where`` only for cheap, pure, elementwise, same-target arms."""
    arms = (node.body, node.orelse)
    if not node.orelse:
        return "cond", "torch.cond: no else branch"
    for arm in arms:
        if not all(isinstance(s, ast.Assign) and len(s.targets) == 1
                   and isinstance(s.targets[0], ast.Name) for s in arm):
            return "cond", "torch.cond: a branch does more than assign names"
    if set(stored_names(node.body)) != set(stored_names(node.orelse)):
        return "cond", "torch.cond: branches assign different names"
    size = sum(1 for _ in walk_local(node.body + node.orelse))
    if size > WHERE_MAX_NODES:
        return "cond", f"torch.cond: branches too large for predication ({size} > {WHERE_MAX_NODES} nodes)"
    for call in (c for c in walk_local(node.body + node.orelse) if isinstance(c, ast.Call)):
        func = call.func
        callee = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if callee not in PURE_CALLS:
            return "cond", f"torch.cond: `{callee}` is not a known pure elementwise call"
    return "where", (f"torch.where: both arms cheap, pure, elementwise ({size} nodes <= "
                     f"{WHERE_MAX_NODES}); falls back to cond if shapes differ at trace time")


# -- specialisation (guard) ---------------------------------------------------------------

def _guard(node: ast.If, ctx: RewriteContext, why: str) -> list[ast.stmt]:
    """Keep only the arm example 0 took; a runtime check refuses inputs taking the other."""
    side = ctx.sides[node.lineno]
    arm = node.body if side else (node.orelse or [ast.Pass()])
    source = ast.unparse(node.test)
    message = (f"stitch specialised `if {source}` ({ctx.filename}:{node.lineno}) to its "
               f"{'true' if side else 'false'} branch because {why}; this input takes the other "
               "branch. Export with an example that takes it, or run the model eagerly.")
    check = ast.Expr(rt_call("guard", ast.Constant(ctx.label(node)), _boolean(node.test),
                             ast.Constant(side), ast.Constant(encode_message(message))))
    ctx.decide(Action.GUARD, node, f"specialised to the {'true' if side else 'false'} branch "
               f"(the one example 0 takes) with a runtime check; {why}")
    return [located(check, node), *arm]


class _IfExps(ast.NodeTransformer):
    """``a if t else b`` on a data-dependent line: cond over two thunks, or specialised."""

    def __init__(self, ctx: RewriteContext, lines: set[int]) -> None:
        self.ctx, self.lines = ctx, lines
        self.guards: list[ast.stmt] = []

    def visit_FunctionDef(self, node):
        return node

    visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = visit_FunctionDef

    def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
        self.generic_visit(node)
        if node.lineno not in self.lines:
            return node
        ctx = self.ctx
        label = ctx.label(node)
        if node.lineno in ctx.force_guard or node.lineno in ctx.sides:
            side = ctx.sides.get(node.lineno, False)
            message = (f"stitch specialised `{ast.unparse(node)}` ({ctx.filename}:{node.lineno}) "
                       f"to its {'true' if side else 'false'} value; this input takes the other.")
            ctx.decide(Action.GUARD, node, f"conditional expression specialised to its "
                       f"{'true' if side else 'false'} value with a runtime check")
            return rt_call("guarded_value", ast.Constant(label), _boolean(node.test),
                           ast.Constant(side), ast.Constant(encode_message(message)),
                           _thunk(node.body if side else node.orelse))
        ctx.decide(Action.COND, node, "conditional expression -> torch.cond over two thunks")
        pick = rt_call("cond", ast.Constant(label), rt_call("pred", _boolean(node.test)),
                       _thunk(rt_call("fresh", ast.Tuple([node.body], ast.Load()))),
                       _thunk(rt_call("fresh", ast.Tuple([node.orelse], ast.Load()))),
                       ast.Tuple([], ast.Load()))
        return ast.Subscript(pick, ast.Constant(0), ast.Load())


def _thunk(expr: ast.expr) -> ast.Lambda:
    return ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[],
                                         kw_defaults=[], kwarg=None, defaults=[]), body=expr)


def _ifexps(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    lines = {ln for ln, s in ctx.sites.items() if s.kind.value == "branch"} | ctx.dependent_lines
    transformer = _IfExps(ctx, lines)
    func.body = [transformer.visit(s) for s in func.body]
