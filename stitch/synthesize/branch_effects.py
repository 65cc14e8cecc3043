"""Side effects inside a data-dependent branch, for ``branch_to_cond``: print, logging,
warnings.warn, and appends to a list attribute (``self.history.append(v)``).

    if h.mean() > 0:                    def __stitch_true_1(h):
        h = self.b(h)                       h = self.b(h)
        print("max", h.max())     ->        __stitch_fx_1_0 = ("max", h.max())
                                            return ((h,), (__stitch_fx_1_0,))

The branch returns the arguments instead of making the call; ``cond_effects`` turns the
tensors among them into cond outputs and adds the call to the epilogue, guarded by a flag
the cond returns, so it replays exactly when its branch ran.
"""

from __future__ import annotations

import ast

from capture.sites import LOGGING_METHODS, NOT_LOGGERS

from .context import RewriteContext, RewriteRefused
from .names import function_def, name, rt_call, tuple_of, walk_local


def _self_attribute(node: ast.expr) -> bool:
    """``self.x`` / ``self.a.b``: an attribute chain on ``self``."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id == "self"


def effect_kind(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name) and func.id == "print":
        return "print"
    if (isinstance(func, ast.Attribute) and func.attr == "append"
            and isinstance(func.value, ast.Attribute) and _self_attribute(func.value)):
        return "append"  # self.<list attribute>.append(v)
    if isinstance(func, ast.Attribute):
        receiver = func.value
        recv = receiver.id if isinstance(receiver, ast.Name) else (
            receiver.attr if isinstance(receiver, ast.Attribute) else "")
        if recv == "warnings" and func.attr == "warn":
            return "warn"
        if func.attr in LOGGING_METHODS and recv and recv not in NOT_LOGGERS:
            return "log"
    return None


def effect_calls(stmts) -> list[ast.Call]:
    return [n for n in walk_local(stmts) if isinstance(n, ast.Call) and effect_kind(n)]


_ONCE_BLOCKS = (ast.If,)  # their bodies run at most once per branch run (`with` is refused
# by torch.cond anyway)


def _effect_statements(block: list, ctx_where: str) -> list[tuple[list, int, ast.stmt]]:
    """``(parent block, index, statement)`` of every effect-call statement in ``block``, in
    source order, at the top level or inside ``if`` blocks (Python-level conditions: each
    runs at most once). Calls in a loop or ``try``, or not made as a
    statement of their own, are refused."""
    found = []
    for i, stmt in enumerate(block):
        if (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
                and effect_kind(stmt.value)):
            found.append((block, i, stmt))
        elif isinstance(stmt, _ONCE_BLOCKS):
            for field_name in ("body", "orelse"):
                found += _effect_statements(getattr(stmt, field_name, None) or [], ctx_where)
        elif effect_calls([stmt]):
            raise RewriteRefused(
                f"a print/log/warn/append inside a `{type(stmt).__name__.lower()}` in a branch "
                f"({ctx_where}:{stmt.lineno}); stitch defers such calls at a branch's top level "
                "or inside if blocks, where each runs at most once")
    return found


def extract_effects(node: ast.If, n: int, ctx: RewriteContext) -> list:
    """Replace print/log/warn/append statements in both arms (at the top level or inside
    if blocks) by captures of their args: ``__stitch_fx_<n>_<k> = (args...)``. An arm
    starts with every capture set to None, so a call the arm did not reach stays None."""
    effects = []
    for arm, block in ((True, node.body), (False, node.orelse)):
        for parent, i, stmt in _effect_statements(block, ctx.filename):
            call = stmt.value
            kind = effect_kind(call)
            if any(isinstance(a, ast.Starred) for a in call.args):
                raise RewriteRefused("a side-effect call with *args in a branch")
            keywords = {k.arg: k.value for k in call.keywords}
            args = list(call.args)
            if kind == "append":
                if len(args) != 1 or keywords:
                    raise RewriteRefused("list.append with other than one argument")
                options = rt_call("effect_options", ast.Constant("append"),
                                  target=call.func.value)
            elif kind == "print":
                options = rt_call("effect_options", ast.Constant("print"), **{
                    k: keywords[k] for k in ("sep", "end", "file") if k in keywords})
            elif kind == "log":
                options = rt_call("effect_options", ast.Constant("log"),
                                  logger=call.func.value, method=ast.Constant(call.func.attr))
            else:
                category = keywords.get("category", args[1] if len(args) > 1 else None)
                args = args[:1] if args else [keywords["message"]]
                options = rt_call("effect_options", ast.Constant("warn"),
                                  **({"category": category} if category is not None else {}),
                                  filename=ast.Constant(ctx.filename),
                                  lineno=ast.Constant(stmt.lineno),
                                  module=ast.Name("__name__", ast.Load()))
            k = len(effects)
            parent[i] = ast.copy_location(ast.Assign(
                targets=[name(f"__stitch_fx_{n}_{k}", True)],
                value=ast.Tuple(args, ast.Load())), stmt)
            effects.append((kind, arm, options, f"{ctx.filename}:{stmt.lineno}"))
    return effects


def unset_effects(effects, n: int) -> list[ast.stmt]:
    """``__stitch_fx_<n>_<k> = None`` for every effect: a call an arm does not reach."""
    return [ast.Assign(targets=[name(f"__stitch_fx_{n}_{k}", True)], value=ast.Constant(None))
            for k in range(len(effects))]


def effect_branch_fn(fn_name, params, body, outputs, effects, arm, n) -> ast.FunctionDef:
    values = ast.Tuple([name(f"__stitch_fx_{n}_{k}") if effect_arm == arm else ast.Constant(None)
                        for k, (_kind, effect_arm, _o, _w) in enumerate(effects)], ast.Load())
    ret = ast.Return(ast.Tuple([tuple_of(outputs), values], ast.Load()))
    return function_def(fn_name, params, unset_effects(effects, n) + (body or []) + [ret])
