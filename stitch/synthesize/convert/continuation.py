"""A data-dependent ``if`` takes the rest of the function with it (its continuation).

Three cases copy the statements after the ``if`` into each arm that falls through, so that
``torch.cond`` covers them (``branch_to_cond`` then rewrites the ``if`` as a returning cond):

1. an arm returns early: the rest runs only on the arms that fall through;
2. an arm binds a name the other does not, that the rest reads, and the condition is a
   flag (a plain name) the rest never rebinds. Longformer computes the global-attention
   indices under ``if is_global_attn:`` and uses them under two later ``if is_global_attn:``
   blocks. One cond per ``if`` cannot carry a name one arm never binds; a continuation
   can: in each arm's copy of the rest the flag's value is known, so ``if flag:`` there
   keeps its body (true arm) or its ``else`` (false arm), and ``flag`` in the conditions
   of ``if``/``a if flag else b``/``and``/``or`` becomes the constant.

    if flag:                        if flag:
        idx = f(x)                      idx = f(x)
    y = g(x)                 ->         y = g(x)
    if flag:                            y = y + h(idx)
        y = y + h(idx)                  return y
    return y                        else:
                                        y = g(x)
                                        return y

The graph holds both copies of the rest (one runs); the result is exact, and the later
``if flag:`` sites are resolved, not guarded.

3. a cond over the names the arms assign failed to trace on an earlier attempt, its sides
   giving a name tensors of different ranks (torchvision's ``BoxCoder.decode``: a reshape
   to 3 dims only when a size from data is not 0) or kinds: each arm's copy of the rest
   carries its own value to the function's return, where the ranks may agree again.
4. a name the ``if`` leaves ``None`` on one side and something else on the other, read after
   it (``extra = None; if t: extra = h.mean(0)`` ... ``h if extra is None else h + extra``):
   a cond returns one structure from both sides; each arm's copy of the rest reads its own
   side's value, and ``extra is None`` there is Python again. Known from the source: the
   value each side leaves is the arm's last plain assignment of the name, or the one before
   the ``if`` that reaches it. Only for an ``if`` reached from the function's body through
   ``if``s (the rest of a loop's body would not hold the reads after the loop).
"""

from __future__ import annotations

import ast
import copy

from ...plan import Action
from ..analysis.context import RewriteContext
from ..analysis.names import (
    bound_before,
    contains,
    ends_in_exit,
    path_to,
    stored_names,
    walk_local,
)
from ..analysis.origins import note_built

# context managers whose only state is autograd's grad mode: the rest after such a ``with``
# may run inside it once grad mode is set back to what it was before the block
_GRAD_MODES = frozenset({"no_grad", "enable_grad", "set_grad_enabled"})


def lift_continuations(stmts: list[ast.stmt], func: ast.FunctionDef,
                       ctx: RewriteContext) -> list[ast.stmt]:
    """``stmts`` with the first ``if`` that needs it holding the rest of the block."""
    for i, stmt in enumerate(stmts):
        if _grad_mode_block(stmt) and any(needs_lift(s, func, ctx) for s in stmt.body):
            # ``with torch.no_grad(): ... if t: return a ...`` then the rest: the rest joins
            # the block's end once grad mode is set back as the block's exit sets it (the
            # exit still sets it back where the rest returns or raises)
            mode = f"__stitch_grad_{stmt.lineno}"
            before = ast.copy_location(ast.Assign(
                [ast.Name(mode, ast.Store())], _torch_call("is_grad_enabled")), stmt)
            back = ast.copy_location(ast.Expr(_torch_call(
                "set_grad_enabled", ast.Name(mode, ast.Load()))), stmt)
            stmt.body = lift_continuations(stmt.body + [back] + stmts[i + 1:], func, ctx)
            return [*stmts[:i], ast.fix_missing_locations(before), stmt]
        if needs_lift(stmt, func, ctx):
            rest = stmts[i + 1:]
            flag = _specialisable_flag(stmt, func, ctx, rest)
            if stmt.lineno in ctx.rest_lines and flag is None:
                ctx.continuations[stmt.lineno] = (
                    "one cond over the names the branches assign failed ("
                    f"{ctx.rest_lines[stmt.lineno]}): the rest of the function became each "
                    "branch's continuation")
            optional = none_on_one_side(stmt, func)
            if optional and flag is None and stmt.lineno not in ctx.rest_lines:
                ctx.continuations[stmt.lineno] = (
                    f"`{'`, `'.join(optional)}` None on one branch only and read later: the "
                    "rest of the function became each branch's continuation")
            if flag is not None:
                ctx.continuations[stmt.lineno] = (
                    f"`{'`, `'.join(one_sided_live(stmt, func, ctx))}` bound on one branch "
                    f"only and read later: the rest of the function became each branch's "
                    f"continuation, `{flag}` fixed to the branch's side in it")
            if not ends_in_exit(stmt.body):
                stmt.body = stmt.body + _copy_rest(rest, flag, True, stmt, ctx)
            if not ends_in_exit(stmt.orelse):
                stmt.orelse = (stmt.orelse or []) + _copy_rest(rest, flag, False, stmt, ctx)
            stmt.body = lift_continuations(stmt.body, func, ctx)
            stmt.orelse = lift_continuations(stmt.orelse, func, ctx)
            return stmts[: i + 1]
    return stmts


def _torch_call(attr: str, *args: ast.expr) -> ast.Call:
    return ast.Call(ast.Attribute(ast.Name("torch", ast.Load()), attr, ast.Load()),
                    list(args), [])


def _grad_mode_block(stmt: ast.stmt) -> bool:
    """``with torch.no_grad():`` (``enable_grad``, ``set_grad_enabled(...)``), alone; not
    ``inference_mode``, whose state grad mode does not set back."""
    if not isinstance(stmt, ast.With) or len(stmt.items) != 1 or stmt.items[0].optional_vars:
        return False
    call = stmt.items[0].context_expr
    return (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            and isinstance(call.func.value, ast.Name) and call.func.value.id == "torch"
            and call.func.attr in _GRAD_MODES)


def needs_lift(stmt: ast.stmt, func: ast.FunctionDef, ctx: RewriteContext) -> bool:
    if not isinstance(stmt, ast.If):
        return False
    if stmt.lineno in ctx.dependent_lines and takes_rest(stmt, func, ctx):
        return True
    return any(needs_lift(s, func, ctx) for s in stmt.body + stmt.orelse)


def takes_rest(stmt: ast.If, func: ast.FunctionDef, ctx: RewriteContext) -> bool:
    """The statements after this data-dependent ``if`` become part of its arms."""
    return (contains(stmt.body + stmt.orelse, ast.Return) or stmt.lineno in ctx.rest_lines
            or _specialisable_flag(stmt, func, ctx) is not None
            or bool(none_on_one_side(stmt, func)))


def none_on_one_side(stmt: ast.If, func: ast.FunctionDef) -> list[str]:
    """Names read after ``stmt`` that one of its sides leaves ``None`` (a literal) and the
    other leaves anything else (case 4); none where ``stmt`` is not reached through ifs."""
    path = path_to(func.body, stmt)
    if path is None or any(not isinstance(block[i], ast.If) for block, i in path[:-1]):
        return []
    later = read_after(func, stmt)
    found = []
    for n in sorted(set(stored_names(stmt.body)) | set(stored_names(stmt.orelse))):
        if n not in later or n.startswith("__stitch_"):
            continue
        before = _reaching(n, path)
        sides = [_last_value(n, arm, before) for arm in (stmt.body, stmt.orelse)]
        if sum(_is_none(v) for v in sides) == 1:
            found.append(n)
    return found


_UNKNOWN = ast.Name("<unknown>", ast.Load())  # a value the source does not tell


def _is_none(value: ast.expr | None) -> bool:
    return isinstance(value, ast.Constant) and value.value is None


def _last_value(n: str, stmts: list[ast.stmt], default: ast.expr | None) -> ast.expr | None:
    """The value of the last statement of ``stmts`` storing ``n``, if a plain ``n = value``
    (``_UNKNOWN`` if stored otherwise); ``default`` where none stores it."""
    for stmt in reversed(stmts):
        if n in stored_names([stmt]):
            plain = (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                     and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id == n)
            return stmt.value if plain else _UNKNOWN
    return default


def _reaching(n: str, path: list) -> ast.expr | None:
    """The value of ``n`` reaching the statement ``path`` ends at, from the statements
    before it in each enclosing block (innermost first); None where nothing before binds it
    (read then, it raises in eager too, so either answer keeps the rewrite exact)."""
    for block, i in reversed(path):
        value = _last_value(n, block[:i], None)
        if value is not None:
            return value
    return None


def one_sided_live(stmt: ast.If, func: ast.FunctionDef, ctx: RewriteContext) -> list[str]:
    """Names one arm binds and the other does not, unbound before the ``if`` and read after
    it (a one-arm cond cannot carry them)."""
    in_true, in_false = set(stored_names(stmt.body)), set(stored_names(stmt.orelse))
    bound = bound_before(func, stmt)
    later = read_after(func, stmt)
    return sorted(n for n in in_true ^ in_false
                  if n not in bound and n in later and not n.startswith("__stitch_"))


def read_after(func: ast.FunctionDef, node: ast.stmt) -> set[str]:
    """Names read anywhere after ``node`` in source order (a liveness over-approximation)."""
    end = node.end_lineno or node.lineno
    return {n.id for n in walk_local(func.body) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load) and getattr(n, "lineno", 0) > end}


def _flag_of(test: ast.expr) -> str | None:
    return test.id if isinstance(test, ast.Name) else None


def _specialisable_flag(stmt: ast.If, func: ast.FunctionDef, ctx: RewriteContext,
                        rest: list[ast.stmt] | None = None) -> str | None:
    """The flag case-2 continuations fix: a plain-name condition of an ``if`` with one-sided
    live names, in a function that ends by returning, the flag never rebound nor changed in
    place after the ``if`` (so its value is the same at every later use)."""
    flag = _flag_of(stmt.test)
    if flag is None or not ctx.flag_continuations or stmt.lineno not in ctx.dependent_lines \
            or not ends_in_exit(func.body):
        return None
    if not one_sided_live(stmt, func, ctx):
        return None
    after = stmt.body + stmt.orelse + (rest if rest is not None else _rest_of(func, stmt))
    if flag in stored_names(after) or _changed_in_place(flag, after):
        return None
    return flag


def _rest_of(func: ast.FunctionDef, stmt: ast.stmt) -> list[ast.stmt]:
    """Every statement after ``stmt`` in source order (for the rebinding check)."""
    end = stmt.end_lineno or stmt.lineno
    return [s for s in walk_local(func.body)
            if isinstance(s, ast.stmt) and getattr(s, "lineno", 0) > end]


def _changed_in_place(flag: str, stmts: list[ast.stmt]) -> bool:
    return any(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
               and isinstance(c.func.value, ast.Name) and c.func.value.id == flag
               and c.func.attr.endswith("_") for c in walk_local(stmts))


def _copy_rest(rest: list[ast.stmt], flag: str | None, side: bool, anchor: ast.If,
               ctx: RewriteContext) -> list[ast.stmt]:
    copied = copy.deepcopy(rest)
    if flag is None:
        return copied
    fixer = _FixFlag(flag, side, anchor, ctx)
    out: list[ast.stmt] = []
    for stmt in copied:
        fixed = fixer.visit(stmt)
        out.extend(fixed if isinstance(fixed, list) else [fixed])
    return out


class _FixFlag(ast.NodeTransformer):
    """In one arm's copy of the rest: ``if flag:`` / ``if not flag:`` keeps the block that
    side runs; ``flag`` in other conditions becomes that constant (only where truthiness is
    what is read: ``and``/``or``/``not`` operands of an ``if``/``while``/``x if c else y``)."""

    def __init__(self, flag: str, side: bool, anchor: ast.If, ctx: RewriteContext) -> None:
        self.flag, self.side, self.anchor, self.ctx = flag, side, anchor, ctx

    def visit_FunctionDef(self, node):
        return node  # another scope: its `flag` may be another name

    visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = visit_FunctionDef

    def visit_If(self, node: ast.If):
        self.generic_visit(node)
        value = self._value_of(node.test)
        if value is not None:
            self._decide(node)
            kept = node.body if value else node.orelse
            return kept or [ast.copy_location(ast.Pass(), node)]
        self._fold_test(node)
        return node

    def visit_IfExp(self, node: ast.IfExp):
        self.generic_visit(node)
        value = self._value_of(node.test)
        if value is not None:
            self._decide(node)
            return node.body if value else node.orelse
        self._fold_test(node)
        return node

    def _value_of(self, test: ast.expr) -> bool | None:
        """The condition's value when it is ``flag`` or ``not flag``; else None."""
        if _flag_of(test) == self.flag:
            return self.side
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) \
                and _flag_of(test.operand) == self.flag:
            return not self.side
        return None

    def visit_While(self, node: ast.While):
        self.generic_visit(node)
        self._fold_test(node)
        return node

    def _fold_test(self, node: ast.If | ast.IfExp | ast.While) -> None:
        before = ast.dump(node.test)
        node.test = self._fold(node.test)
        if ast.dump(node.test) != before:
            self._decide(node, "in its condition")

    def _fold(self, test: ast.expr) -> ast.expr:
        """``flag`` -> constant inside ``and``/``or``/``not`` of a condition."""
        if _flag_of(test) == self.flag:
            return ast.copy_location(ast.Constant(self.side), test)
        if isinstance(test, ast.BoolOp):
            test.values = [self._fold(v) for v in test.values]
        elif isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test.operand = self._fold(test.operand)
        return test

    def _decide(self, node: ast.AST, where: str = "") -> None:
        # the anchor's side now decides later tests too: the model's one test does not
        note_built(self.ctx.origins, self.ctx.label(self.anchor))
        location = f"{self.ctx.filename}:{node.lineno}"
        if any(d.location == location for d in self.ctx.decisions):
            return  # once, not once per arm
        how = (f"`{self.flag}` fixed to each branch's side {where}" if where else
               "the true branch keeps the body, the false the else")
        self.ctx.decide(Action.COND, node, f"same flag `{self.flag}` as line "
                        f"{self.anchor.lineno}: resolved in each branch of that if's "
                        f"continuation ({how})")
