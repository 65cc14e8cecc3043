"""Side effects inside a data-dependent branch, for ``branch_to_cond``: print, logging,
warnings.warn, appends to a list attribute (``self.history.append(v)``), and calls to
helpers whose own body makes such calls (``helper_effects``: ``record(h.min())``).

    if h.mean() > 0:                    def __stitch_true_1(h):
        h = self.b(h)                       __stitch_fx_1 = []
        print("max", h.max())     ->        h = self.b(h)
                                            __stitch_fx_1.append((0, ("max", h.max())))
                                            return ((h,), __stitch_fx_1)

The branch logs the calls it makes, with their arguments, instead of making them (a call
in a loop once per iteration, one inside a Python-level ``if`` only when reached);
``cond_effects`` turns the tensors among the arguments into cond outputs and adds each
logged call to the epilogue, guarded by a flag the cond returns, so it replays exactly when
its branch ran, in the order the branch made them.
"""

from __future__ import annotations

import ast

from capture.sites import side_effect_call

from ...epilogue.targets import ARM_APPENDED
from ..analysis.context import RewriteContext, RewriteRefused
from ..analysis.names import function_def, is_rt_call, name, rt_call, tuple_of, walk_local

_STATE = ("rebind", "add", "set_item")  # state a branch sets: (owner, name, value) calls


def _self_attribute(node: ast.expr) -> bool:
    """``self.x`` / ``self.a.b``: an attribute chain on ``self``."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id == "self"


def effect_kind(call: ast.Call, warn_names: frozenset[str] = frozenset(),
                local: frozenset[str] | None = None,
                helpers: frozenset[str] = frozenset()) -> str | None:
    """``print``, ``warn``, ``log``, ``append``, ``call`` or ``rebind`` (a state set
    ``branch_state`` turned into a ``set_state`` call). ``append``: ``<list>.append(v)``
    / ``.extend(v)`` on a list that outlives the call — an attribute chain (``self.seen``,
    ``type(self).history``, ``Model.history``, ``module.seen`` on a parameter), or a name the
    function does not bind itself (a module global, a closure variable). ``local`` holds the
    names the function binds (assignments; its parameters are not in it); None: only
    ``self.<attr>`` counts. ``call``: a call by name to one of ``helpers``, functions whose
    own body makes such calls (``helper_effects``)."""
    func = call.func
    if is_rt_call(call, "set_state"):  # state a branch sets (branch_state)
        return "rebind"
    if is_rt_call(call, "add_state"):  # a counter a branch adds to (branch_state)
        return "add"
    if is_rt_call(call, "set_item_state"):  # a dict item a branch sets (branch_state)
        return "set_item"
    if isinstance(func, ast.Name) and func.id in helpers and func.id not in (local or ()):
        return "call"
    if isinstance(func, ast.Attribute) and func.attr in ("append", "extend") \
            and _outlives_call(func.value, local):
        return "append"
    found = side_effect_call(call, warn_names)
    return None if found is None else {"print": "print", "warnings.warn": "warn"}.get(
        found, "log")


def _outlives_call(receiver: ast.expr, local: frozenset[str] | None) -> bool:
    if local is None:
        return isinstance(receiver, ast.Attribute) and _self_attribute(receiver)
    if isinstance(receiver, ast.Name):
        return receiver.id not in local and receiver.id != "self"
    while isinstance(receiver, ast.Attribute):
        receiver = receiver.value
    if isinstance(receiver, ast.Call):  # type(self).history
        return isinstance(receiver.func, ast.Name) and receiver.func.id == "type"
    return isinstance(receiver, ast.Name) and receiver.id not in local


def bound_names(func: ast.AST | None) -> frozenset[str] | None:
    """Names ``func`` binds in its own body (assigned, loop targets, imports, ``with``
    targets); parameters are left out: an attribute of a parameter outlives the call."""
    if func is None:
        return None
    out = set()
    for node in ast.walk(func):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            out.add(node.id)
        elif isinstance(node, ast.alias):
            out.add((node.asname or node.name).split(".")[0])
    declared = {n for node in ast.walk(func) if isinstance(node, ast.Global | ast.Nonlocal)
                for n in node.names}
    return frozenset(out - declared)


def effect_calls(stmts, warn_names: frozenset[str] = frozenset(),
                 local: frozenset[str] | None = None,
                 helpers: frozenset[str] = frozenset()) -> list[ast.Call]:
    return [n for n in walk_local(stmts)
            if isinstance(n, ast.Call) and effect_kind(n, warn_names, local, helpers)]


# Python-level blocks the trace resolves (a data-dependent if or loop in a branch was
# already rewritten into a cond or while_loop); each call made in them is logged when made.
# `try`/`with` are refused: torch.cond cannot express them anyway.
_BLOCKS = (ast.If, ast.For, ast.While)


def _effect_statements(block: list, ctx: RewriteContext) -> list[tuple[list, int, ast.stmt]]:
    """``(parent block, index, statement)`` of every effect-call statement in ``block``, in
    source order, at the top level or inside ``if``/``for``/``while`` blocks. Calls in a
    ``try`` or ``with``, or not made as a statement of their own, are refused."""
    found = []
    local = bound_names(ctx.func)
    for i, stmt in enumerate(block):
        if (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
                and effect_kind(stmt.value, ctx.warn_names, local, ctx.helpers)):
            found.append((block, i, stmt))
        elif isinstance(stmt, ast.If) and stmt.lineno in ctx.dependent_lines \
                and effect_calls(stmt.body + stmt.orelse, ctx.warn_names, local, ctx.helpers):
            raise RewriteRefused(
                f"a print/log/warn/append in a data-dependent branch ({ctx.filename}:"
                f"{stmt.lineno}) nested inside this one, which was not rewritten itself "
                "(see its own decision)")
        elif isinstance(stmt, _BLOCKS) and not effect_calls(
                [stmt.test if isinstance(stmt, ast.If | ast.While) else stmt.iter],
                ctx.warn_names, local, ctx.helpers):
            for field_name in ("body", "orelse"):
                found += _effect_statements(getattr(stmt, field_name, None) or [], ctx)
        elif effect_calls([stmt], ctx.warn_names, local, ctx.helpers):
            raise RewriteRefused(
                f"a print/log/warn/append inside a `{type(stmt).__name__.lower()}` in a branch "
                f"({ctx.filename}:{stmt.lineno}), or not a statement of its own; stitch "
                "defers such calls made as statements in a branch, also inside if/for/while "
                "blocks")
    return found


def log_name(n: int) -> str:
    return f"__stitch_fx_{n}"


def extract_effects(node: ast.If, n: int, ctx: RewriteContext) -> list:
    """Replace print/log/warn/append statements in both arms (at the top level or inside
    if/for/while blocks) by entries in the arm's log: ``__stitch_fx_<n>.append((k,
    (args...)))``; each arm starts with an empty log (``start_log``)."""
    effects = []
    for arm, block in ((True, node.body), (False, node.orelse)):
        for parent, i, stmt in _effect_statements(block, ctx):
            call = stmt.value
            kind = effect_kind(call, ctx.warn_names, bound_names(ctx.func), ctx.helpers)
            if any(isinstance(a, ast.Starred) for a in call.args):
                raise RewriteRefused("a side-effect call with *args in a branch")
            keywords = {k.arg: k.value for k in call.keywords}
            args = list(call.args)
            if kind in _STATE:  # the value set (added), as the forward has it
                options = rt_call("effect_options", ast.Constant(kind), owner=args[0],
                                  name=args[1], **({"start": args[3]} if len(args) > 3 else {}))
                args = [args[2]]
            elif kind == "append":
                if len(args) != 1 or keywords or call.func.attr != "append":
                    raise RewriteRefused(f"list.{call.func.attr} with other than one argument "
                                         "in a branch: write one append per value")
                options = rt_call("effect_options", ast.Constant("append"),
                                  target=call.func.value)
                receiver = call.func.value  # reads of that list elsewhere are refused
                ARM_APPENDED.add(("attr", receiver.attr) if isinstance(receiver, ast.Attribute)
                                 else ("name", getattr(receiver, "id", "")))
            elif kind == "call":
                if keywords:
                    raise RewriteRefused(
                        f"a call to helper `{call.func.id}` with keyword arguments in a branch "
                        f"({ctx.filename}:{stmt.lineno}); stitch defers helper calls with "
                        "positional arguments only")
                options = rt_call("effect_options", ast.Constant("call"), function=call.func,
                                  name=ast.Constant(call.func.id),
                                  module=ast.Name("__name__", ast.Load()))
            elif kind == "print":
                options = rt_call("effect_options", ast.Constant("print"), **{
                    k: keywords[k] for k in ("sep", "end", "file") if k in keywords})
            elif kind == "log":
                options = rt_call("effect_options", ast.Constant("log"),
                                  **_logger_of(call.func.value),
                                  method=ast.Constant(call.func.attr))
            else:
                category = keywords.get("category", args[1] if len(args) > 1 else None)
                args = args[:1] if args else [keywords["message"]]
                level = keywords.get("stacklevel", call.args[2] if len(call.args) > 2 else None)
                options = rt_call("effect_options", ast.Constant("warn"),
                                  **({"category": category} if category is not None else {}),
                                  **({"stacklevel": level} if level is not None else {}),
                                  filename=ast.Constant(ctx.filename),
                                  lineno=ast.Constant(stmt.lineno),
                                  module=ast.Name("__name__", ast.Load()))
            if kind not in ("append", *_STATE):  # text from traced values: the epilogue's
                args = [deferred_text(a) for a in args]
            k = len(effects)
            values = ast.Tuple(args, ast.Load())
            if kind not in ("append", *_STATE):  # printed as at the call (an append or a
                values = rt_call("taken", values)  # state set keeps the object)
            entry = ast.Tuple([ast.Constant(k), values], ast.Load())
            parent[i] = ast.copy_location(ast.Expr(ast.Call(
                func=ast.Attribute(name(log_name(n)), "append", ast.Load()),
                args=[entry], keywords=[])), stmt)
            effects.append((kind, arm, options, f"{ctx.filename}:{stmt.lineno}"))
    return effects


def _logger_of(receiver: ast.expr) -> dict[str, ast.expr]:
    """The logger a logging call in a branch logs to: the object, or for one fetched at the
    call (``logging.getLogger(__name__).warning(...)``) its name, so that fetching it is no
    part of what torch.cond traces (Dynamo cannot run ``getLogger``)."""
    if isinstance(receiver, ast.Call) and not receiver.keywords and len(receiver.args) <= 1 \
            and getattr(receiver.func, "attr", getattr(receiver.func, "id", "")) == "getLogger":
        return {"logger_name": receiver.args[0] if receiver.args else ast.Constant("")}
    return {"logger": receiver}


_CONVERSIONS = {-1: "", 115: "s", 114: "r", 97: "a"}


def deferred_text(node: ast.expr) -> ast.expr:
    """``f"loss {x:.4f} {h!r}"`` -> ``__stitch_rt__.text(("loss ", (".4f", ""), " ",
    ("", "r")), (x, h))``: formatted now when nothing is traced, in the epilogue when the
    branch is a cond (a traced tensor cannot be formatted inside torch.cond). Other
    expressions, and f-strings whose format spec holds an expression, are left as written."""
    if _literal_format(node):
        return _format_call_text(node)
    if not isinstance(node, ast.JoinedStr):
        return node
    pieces, values = [], []
    for part in node.values:
        if isinstance(part, ast.Constant):
            pieces.append(ast.Constant(part.value))
            continue
        spec = part.format_spec
        if spec is not None and not all(isinstance(v, ast.Constant) for v in spec.values):
            return node
        text = "".join(v.value for v in spec.values) if spec is not None else ""
        pieces.append(ast.Tuple([ast.Constant(text),
                                 ast.Constant(_CONVERSIONS.get(part.conversion, ""))],
                                ast.Load()))
        values.append(part.value)
    return ast.copy_location(rt_call("text", ast.Tuple(pieces, ast.Load()),
                                     ast.Tuple(values, ast.Load())), node)


def _literal_format(node: ast.expr) -> bool:
    """``"...".format(a, b)``: a literal template, positional arguments only."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "format" and isinstance(node.func.value, ast.Constant)
            and isinstance(node.func.value.value, str) and not node.keywords
            and not any(isinstance(a, ast.Starred) for a in node.args))


def _format_call_text(node: ast.Call) -> ast.expr:
    """``"q {:.2f} {!r}".format(a, b)`` -> ``text(("q ", (".2f", ""), " ", ("", "r")), (a, b))``;
    fields by position (``{}``, ``{0}``) with literal specs only, else left as written."""
    import string

    pieces, values, auto = [], [], 0
    try:
        parsed = list(string.Formatter().parse(node.func.value.value))
    except ValueError:
        return node
    for literal, field, spec, conversion in parsed:
        if literal:
            pieces.append(ast.Constant(literal))
        if field is None:
            continue
        if field == "":
            index, auto = auto, auto + 1
        elif field.isdigit():
            index = int(field)
        else:
            return node
        if index >= len(node.args) or "{" in (spec or ""):
            return node
        pieces.append(ast.Tuple([ast.Constant(spec or ""), ast.Constant(conversion or "")],
                                ast.Load()))
        values.append(node.args[index])
    return ast.copy_location(rt_call("text", ast.Tuple(pieces, ast.Load()),
                                     ast.Tuple(values, ast.Load())), node)


def start_log(n: int) -> list[ast.stmt]:
    """``__stitch_fx_<n> = []``: an arm's log of the effect calls it makes."""
    return [ast.Assign(targets=[name(log_name(n), True)], value=ast.List([], ast.Load()))]


def effect_branch_fn(fn_name, params, body, outputs, n) -> ast.FunctionDef:
    ret = ast.Return(ast.Tuple([tuple_of(outputs), name(log_name(n))], ast.Load()))
    return function_def(fn_name, params, start_log(n) + (body or []) + [ret])
