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

from ...plan import Action
from ..analysis.context import RewriteContext, RewriteRefused
from ..analysis.names import (
    bound_before,
    contains,
    ends_in_exit,
    is_rt_call,
    located,
    name,
    nonlocal_names,
    rt_call,
    stored_names,
    surely_bound,
    tuple_of,
    walk_local,
)
from ..analysis.origins import note
from ..analysis.truth import boolean
from ..canonicalize.arm_checks import gate_arms
from ..canonicalize.arm_facts import assume_test
from ..canonicalize.fold_checks import fold_checks, only_checks
from ..canonicalize.ifexp_to_cond import ifexps_to_cond
from ..canonicalize.len_to_size import lengths_in_test
from .arm_functions import branch_fn, returning_fn
from .arm_list_reads import list_reads
from .bounded_loop import is_unrolled
from .branch_attributes import (
    lift_write_backs,
    localize_attributes,
    out_of_place,
    register_buffer_as_assignment,
    self_attributes,
)
from .branch_effects import (
    bound_names,
    effect_branch_fn,
    extract_effects,
    log_name,
)
from .branch_inplace import (
    CARRIER,
    in_place_as_assignment,
    keeps_shape,
    original_of,
    write_back_statements,
)
from .branch_state import declared_globals, globals_as_attributes, state_sets_as_calls
from .carried_state import carried_state, shown
from .cond_keywords import mark_nesting, mark_raising, mark_structures, with_reads
from .continuation import lift_continuations, read_after
from .loop_to_while import over_mask
from .one_arm import gate_effects, is_gate, one_arm
from .specialise import guard_branch
from .split_rest import carried_out, split_rests
from .where_rule import predication_mode

FORBIDDEN = (ast.Break, ast.Continue, ast.Yield, ast.YieldFrom, ast.Await, ast.Global,
             ast.Nonlocal, ast.Try, ast.AsyncWith)


def _forbidden(node: ast.AST) -> bool:
    """A statement an arm cannot hold. A ``with`` block is held when nothing returns from
    inside it: the trace decides whether its context manager can be in a cond (a mask
    helper's ``with`` on a path a Python flag never takes is never traced at all)."""
    return isinstance(node, FORBIDDEN) or (isinstance(node, ast.With)
                                           and contains(node.body, ast.Return))


def branches_to_cond(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    func.body = lift_continuations(func.body, func, ctx)
    func.body = _block(func.body, func, ctx)
    split_rests(func, ctx)
    ifexps_to_cond(func, ctx)


# -- the rewrite --------------------------------------------------------------------------

def _is_dependent(node: ast.If, ctx: RewriteContext) -> bool:
    return node.lineno in ctx.dependent_lines


def _block(stmts: list[ast.stmt], func: ast.FunctionDef, ctx: RewriteContext,
           nested: bool = False) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for stmt in stmts:
        if isinstance(stmt, ast.FunctionDef) and stmt.name.startswith("__stitch_body_"):
            # a loop's body a rewrite made a function of: its ifs are the model's, on the
            # iteration's values (a Python loop over `.tolist()` rows reads sizes from data)
            stmt.body = _block(stmt.body, stmt, ctx, nested)
            out.append(stmt)
            continue
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.append(stmt)
            continue
        one = isinstance(stmt, ast.If) and ctx.is_one_arm(stmt.lineno) and not is_gate(stmt)
        if one:
            gate_effects(stmt, ctx)  # its effects stay where the test holds (one_arm.py)
        inner = nested or (isinstance(stmt, ast.If) and _is_dependent(stmt, ctx))
        for field_name in ("body", "orelse", "finalbody"):
            block = getattr(stmt, field_name, None)
            if block:
                setattr(stmt, field_name, _block(block, func, ctx, inner))
        if one:
            out.append(one_arm(stmt, ctx))  # its other arm at every size (one_arm.py)
        elif isinstance(stmt, ast.If) and _is_dependent(stmt, ctx):
            # a size test is never specialised: torch.export's own guard does that already
            guardable = stmt.lineno in ctx.sides and not ctx.is_size_test(stmt.lineno)
            if stmt.lineno in ctx.force_guard and guardable:
                out.extend(guard_branch(stmt, ctx, ctx.guard_reason))
                continue
            try:
                out.extend(_convert(copy.deepcopy(stmt), func, ctx, anchor=stmt))
            except RewriteRefused as e:
                if guardable:
                    out.extend(guard_branch(stmt, ctx, f"torch.cond not possible: {e}"))
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
    # a ``break``/``continue`` of a loop inside the arm stays in the arm (a Python loop)
    inner = {id(n) for loop in walk_local(arms) if isinstance(loop, ast.For | ast.While)
             for n in walk_local(loop.body) if isinstance(n, ast.Break | ast.Continue)}
    bad = next((n for n in walk_local(arms) if _forbidden(n) and id(n) not in inner), None)
    if bad is not None:
        if isinstance(bad, ast.With):
            raise RewriteRefused(f"a branch returns from inside a `with` block (line "
                                 f"{bad.lineno}), which torch.cond cannot express")
        raise RewriteRefused(f"a branch contains `{type(bad).__name__.lower()}`, which "
                             "torch.cond cannot express")
    left = sorted({f"{ctx.filename}:{n.lineno}" for n in walk_local(arms)
                   if isinstance(n, ast.For) and n.lineno in ctx.loop_lines()
                   and not over_mask(n) and not is_unrolled(n)})
    if left:  # a Python loop over a tensor count cannot be traced inside a cond
        raise RewriteRefused(f"a branch holds a loop counted by a tensor that stays Python "
                             f"({', '.join(left)}; see that loop's decision)")
    why = list_reads(arms, bound_names(ctx.func) or frozenset(), ctx.filename)
    if why is not None:  # the arm would read the list as traced (arm_list_reads.py)
        raise RewriteRefused(why)
    n = ctx.next_id()
    for arm in (node.body, node.orelse):
        why = globals_as_attributes(arm, declared_globals(ctx.func))
        if why is not None:
            raise RewriteRefused(why)
    local = set(bound_names(ctx.func) or ())
    read_carried = carried_state(node, anchor, func, local)  # passed-in attributes read after
    state_sets_as_calls([node.body, node.orelse], local, n,
                        (anchor, func) if read_carried is None else None)
    label = ctx.label(node)
    note(ctx.origins, label, node)
    pred_name = f"__stitch_pred_{n}"
    # a test on an input's size torch.export decided (size_tests.py): a cond on the size
    kind = "size_pred" if ctx.is_size_test(node.lineno) else "pred"
    node.test = lengths_in_test(node.test, ctx.func)  # the arms re-state it so too
    pred = ast.Assign(targets=[name(pred_name, True)],
                      value=rt_call(kind, boolean(node.test, sizes=kind == "size_pred")))
    if contains(arms, ast.Return):
        return _convert_returning(node, n, label, pred, pred_name, func, ctx, anchor)
    register_buffer_as_assignment(node.body)
    register_buffer_as_assignment(node.orelse)
    written, attrs_written = in_place_as_assignment([node.body, node.orelse],
                                                    bound_before(func, anchor), n, ctx.writers)
    inner_inplace = lift_write_backs(node.body) | lift_write_backs(node.orelse)
    arms = node.body + node.orelse
    attrs = self_attributes(arms)
    inplace = inner_inplace | attrs_written | {t.target.attr for t in walk_local(arms)
                               if isinstance(t, ast.AugAssign)
                               and isinstance(t.target, ast.Attribute)}
    localize_attributes(arms, attrs)
    out_of_place(node.body)
    out_of_place(node.orelse)
    effects = extract_effects(node, n, ctx)
    nested = _adopt_nested_effects(arms, n)
    assigned = [a for a in stored_names(node.body) + stored_names(node.orelse)
                if not _synthetic(a)]
    carriers = [w for w in written if w.startswith(CARRIER)]
    assigned = list(dict.fromkeys(assigned + [f"__stitch_attr_{a}" for a in attrs] + carriers))
    if not assigned and not effects and not nested:
        if only_checks(node.body) and only_checks(node.orelse):
            return fold_checks(node, pred, pred_name, ctx)
        raise RewriteRefused("neither branch assigns anything (only side effects)")
    bound = bound_before(func, anchor) | {f"__stitch_attr_{a}" for a in attrs} | set(carriers)
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
    mode, why = predication_mode(node, assigned) if not (effects or nested) else ("cond", "torch.cond")
    reads = _reads(node.body + node.orelse, surely_bound(func, anchor),
                   set(params) | set(assigned))
    args = params + reads
    if effects or nested:
        true_fn = effect_branch_fn(f"__stitch_true_{n}", args, node.body, assigned, n)
        false_fn = effect_branch_fn(f"__stitch_false_{n}", args, node.orelse, assigned, n)
        assume_test(node.test, true_fn, false_fn, ctx.unrolled_names)
        call, deferred = _cond_effects(node, label, pred_name, true_fn, false_fn, args,
                                       effects, ctx, nested, len(reads))
        mark_structures(call, node, outputs=carried_out(node, func, anchor, assigned, ctx))
        why += deferred
    else:
        true_fn = branch_fn(f"__stitch_true_{n}", args, node.body, assigned)
        false_fn = branch_fn(f"__stitch_false_{n}", args, node.orelse, assigned)
        assume_test(node.test, true_fn, false_fn, ctx.unrolled_names)
        if mode == "where":  # both arms run: checks fire only in the one taken
            gate_arms(true_fn, false_fn, label, pred_name, n)
        call = rt_call("cond", ast.Constant(label), name(pred_name), name(true_fn.name),
                       name(false_fn.name), tuple_of(args), ast.Constant(mode),
                       ast.Constant(tuple(args)), ast.Constant(tuple(assigned)))
        with_reads(call, reads)
        mark_structures(call, node, outputs=carried_out(node, func, anchor, assigned, ctx))
        mark_nesting(call, node.body + node.orelse)
        why += mark_raising(node, ctx, call)
    assign = ast.Assign(targets=[tuple_of(assigned, store=True)], value=call)
    before = [ast.Assign(targets=[name(f"__stitch_attr_{a}", True)],
                         value=ast.Attribute(name("self"), a, ast.Load())) for a in attrs]
    after = [ast.Expr(rt_call("write_back", name("self"), ast.Constant(a),
                              name(f"__stitch_attr_{a}"), ast.Constant(a in inplace)))
             for a in attrs] + read_carried()
    keep, write_into = write_back_statements(written, keeps_shape([node.body, node.orelse]))
    ctx.decide(Action.WHERE if mode == "where" else Action.COND, node,
               f"{why}; carries {', '.join(shown(a) for a in assigned)}"
               + (f"; buffers written back: {', '.join(attrs)}" if attrs else "")
               + (f"; written in place, copied back: {', '.join(map(original_of, written))}" if written else ""))
    return [located(s, node) for s in [pred, *before, *keep, true_fn, false_fn, assign,
                                       *after, *write_into]]


def _convert_returning(node, n, label, pred, pred_name, func, ctx, anchor) -> list[ast.stmt]:
    if not (ends_in_exit(node.body) and ends_in_exit(node.orelse)):
        raise RewriteRefused("one branch returns and the other falls through to the end "
                             "of the function (it would return None)")
    effects = extract_effects(node, n, ctx)
    nested = _adopt_nested_effects(node.body + node.orelse, n)
    register_buffer_as_assignment(node.body)
    register_buffer_as_assignment(node.orelse)
    written, attrs_written = in_place_as_assignment([node.body, node.orelse],
                                                    bound_before(func, anchor), n, ctx.writers)
    inplace = lift_write_backs(node.body) | lift_write_backs(node.orelse) | attrs_written
    arms = node.body + node.orelse
    attrs = self_attributes(arms)
    inplace |= {t.target.attr for t in walk_local(arms) if isinstance(t, ast.AugAssign)
                and isinstance(t.target, ast.Attribute)}
    localize_attributes(arms, attrs)
    out_of_place(node.body)
    out_of_place(node.orelse)
    # returned beside the value: attributes (written back) and tensors written in place
    # (their values at the return, copied into the original objects)
    # a closure's ``nonlocal`` names the arms set: their cells are the caller's, so they
    # leave the cond beside the value and are stored after it
    cells = [a for a in dict.fromkeys(stored_names(node.body) + stored_names(node.orelse))
             if a in nonlocal_names(func)]
    carried = [f"__stitch_attr_{a}" for a in attrs] + written + cells
    bound = bound_before(func, anchor) | set(carried)
    params = [a for a in dict.fromkeys(stored_names(node.body) + stored_names(node.orelse)
                                       + carried)
              if a in bound and (not _synthetic(a) or a in carried)]
    logged = bool(effects or nested)
    reads = _reads(node.body + node.orelse, surely_bound(func, anchor), set(params))
    args = params + reads
    true_fn = returning_fn(f"__stitch_true_{n}", args, node.body, logged, n, carried)
    false_fn = returning_fn(f"__stitch_false_{n}", args, node.orelse, logged, n, carried)
    assume_test(node.test, true_fn, false_fn, ctx.unrolled_names)
    why = ctx.continuations.get(
        node.lineno, "early return: the rest of the function became each branch's continuation")
    if logged:
        call, deferred = _cond_effects(node, label, pred_name, true_fn, false_fn, args,
                                       effects, ctx, nested, len(reads))
        mark_structures(call, node, outputs=ctx.to_outputs)
        why += deferred
    else:
        call = rt_call("cond", ast.Constant(label), name(pred_name), name(true_fn.name),
                       name(false_fn.name), tuple_of(args))
        with_reads(call, reads)
        mark_structures(call, node, outputs=ctx.to_outputs)
        # what an arm returns may be a number an earlier cond gave (symbolic when traced)
        # where the other returns a constant: every number travels as a tensor
        call.keywords.append(ast.keyword("nests", ast.Constant(True)))
        why += mark_raising(node, ctx, call)
    ctx.decide(Action.COND, node, why + (f"; buffers written back: {', '.join(attrs)}"
                                         if attrs else "")
               + (f"; written in place, copied back: {', '.join(map(original_of, written))}" if written else ""))
    if not attrs and not written and not cells:
        ret = ast.Return(ast.Subscript(call, ast.Constant(0), ast.Load()))
        return [located(s, node) for s in [pred, true_fn, false_fn, ret]]
    result = f"__stitch_result_{n}"
    keep, _ = write_back_statements(written)
    before = [ast.Assign(targets=[name(f"__stitch_attr_{a}", True)],
                         value=ast.Attribute(name("self"), a, ast.Load())) for a in attrs]
    before += keep
    after = [ast.Expr(rt_call("write_back", name("self"), ast.Constant(a),
                              ast.Subscript(name(result), ast.Constant(i + 1), ast.Load()),
                              ast.Constant(a in inplace)))
             for i, a in enumerate(attrs)]
    after += [ast.Expr(rt_call("write_into", name(f"__stitch_orig_{original_of(w)}"),
                               ast.Subscript(name(result), ast.Constant(len(attrs) + i + 1),
                                             ast.Load())))
              for i, w in enumerate(written)]
    after += [ast.Assign(targets=[name(c, True)], value=ast.Subscript(
        name(result), ast.Constant(len(attrs) + len(written) + i + 1), ast.Load()))
        for i, c in enumerate(cells)]
    ret = ast.Return(ast.Subscript(name(result), ast.Constant(0), ast.Load()))
    return [located(s, node) for s in [pred, *before, true_fn, false_fn,
                                       ast.Assign(targets=[name(result, True)], value=call),
                                       *after, ret]]


def _reads(arms: list[ast.stmt], bound: set[str], taken: set[str]) -> list[str]:
    """Names the arms (and functions nested in them) only read that are surely bound before
    the ``if`` (``bound``: an unbound one would fail at the call): passed as operands too, so that a symbolic number among them (an
    earlier cond's float or unbacked int, read back) reaches the arms as a 0-d tensor; the
    runtime hands every other one to the arms through the closure, as before
    (``rt_numbers.split_python_values``, ``reads``)."""
    loaded = (n.id for a in arms for n in ast.walk(a)
              if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))
    return [x for x in dict.fromkeys(loaded) if x in bound and x not in taken
            and x != "self" and not _synthetic(x)]


def _adopt_nested_effects(arms: list[ast.stmt], n: int) -> int:
    """Branches with side effects nested in these arms (already rewritten, inner first)
    log their calls into this branch's log (``log=__stitch_fx_<n>``), which replays them
    in order, each guarded by its own flag. Returns how many there are."""
    calls = [c for c in walk_local(arms) if is_rt_call(c, "cond_effects")
             and not any(k.arg == "log" for k in c.keywords)]
    for call in calls:
        call.keywords.append(ast.keyword("log", name(log_name(n))))
    return len(calls)


def _cond_effects(node, label, pred_name, true_fn, false_fn, params, effects,
                  ctx, nested: int = 0, reads: int = 0) -> tuple[ast.Call, str]:
    """The ``cond_effects`` call for a branch with side effects (its own ``effects``, and
    ``nested`` branches with side effects inside it), and what to add to the decision's
    reason."""
    specs = ast.Tuple([ast.Tuple([ast.Constant(kind), ast.Constant(arm), options,
                                  ast.Constant(where)], ast.Load())
                       for kind, arm, options, where in effects], ast.Load())
    call = rt_call("cond_effects", ast.Constant(label), name(pred_name), name(true_fn.name),
                   name(false_fn.name), tuple_of(params), specs)
    if reads:  # the last operands are only read (``_reads``)
        call.keywords.append(ast.keyword("reads", ast.Constant(reads)))
    # the construct runs in Python under torch.compile by design: a break anywhere in its
    # span is expected (Dynamo names the line it was on when the branch ran)
    ctx.deferred_lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    own = (f"; {len(effects)} side effect(s) in the branches deferred to the epilogue, "
           "replayed only when their branch ran") if effects else ""
    inner = (f"; the side effects of {nested} branch(es) nested in it replay in order, "
             "each only when its own branch ran too") if nested else ""
    return call, own + inner


def _synthetic(name_: str) -> bool:
    """Helpers an inner rewrite introduced (its branch functions, predicate): not carried.
    Carried: attribute stand-ins, a loop's break flag (``break_guard``) and the item a loop
    body gives a stacked list (``stacked_lists``)."""
    return name_.startswith("__stitch_") and not name_.startswith(("__stitch_attr_",
                                                                  "__stitch_go_",
                                                                  "__stitch_item_"))
