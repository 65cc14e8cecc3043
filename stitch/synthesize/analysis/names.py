"""Small AST analyses the rewrites share: which names a block stores, reads, returns."""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterable, Iterator

SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def walk_local(nodes: Iterable[ast.AST]) -> Iterator[ast.AST]:
    """ast.walk over statements, not descending into nested functions, lambdas or classes."""
    stack = list(nodes)
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, SCOPES):
            continue  # its name is stored here; its body is another scope
        stack.extend(ast.iter_child_nodes(node))


class LocalTransformer(ast.NodeTransformer):
    """A transformer of one function's own scope: a function stitch made in it (a loop body
    or a cond's arm, named ``__stitch_...``) is that scope too; any other ``def``, lambda or
    class is another scope, left as it is."""

    def visit_FunctionDef(self, node):
        return self.generic_visit(node) if node.name.startswith("__stitch_") else node

    def visit_Lambda(self, node):
        return node

    visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda


def statement_blocks(stmts: list[ast.stmt]) -> Iterator[list[ast.stmt]]:
    """``stmts`` and every statement list inside them (bodies, ``else``s, ``finally``s), not
    those of nested functions or classes."""
    yield stmts
    for node in walk_local(stmts):
        if isinstance(node, SCOPES):
            continue
        for field_name in ("body", "orelse", "finalbody"):
            block = getattr(node, field_name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                yield block


def loop_refusal(node: ast.For) -> str | None:
    """Why a ``for`` loop cannot become one graph construct as a whole (or None): it leaves
    early, has an ``else``, or unpacks into several names."""
    if node.orelse:
        return "the loop has an `else` clause"
    if contains(node.body, ast.Break, ast.Continue, ast.Return, ast.Yield, ast.YieldFrom):
        return "the body leaves the loop early (break/continue/return)"
    if not isinstance(node.target, ast.Name):
        return "the loop variable is not a plain name"
    return None


def reads_number(node: ast.AST) -> bool:
    """``node`` reads a number from a tensor: ``.item()``, or ``int``/``float``/``bool`` of
    something that is not a constant."""
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            func = call.func
            if isinstance(func, ast.Attribute) and func.attr == "item":
                return True
            if isinstance(func, ast.Name) and func.id in ("int", "float", "bool") \
                    and len(call.args) == 1 and not isinstance(call.args[0], ast.Constant):
                return True
    return False


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def stored_names(stmts: list[ast.stmt]) -> list[str]:
    """Names a block assigns (in first-seen order). A comprehension's own variables are
    its scope's, not the block's (a walrus in one binds here)."""
    out: dict[str, None] = {}
    scoped = _comprehension_targets(stmts)
    for node in walk_local(stmts):
        if id(node) in scoped:
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            out[node.id] = None
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out[node.name] = None
    return sorted(out, key=list(out).index)


def _comprehension_targets(stmts: list[ast.stmt]) -> set[int]:
    """ids of the names a comprehension's ``for`` binds: its own scope's in Python 3."""
    return {id(n) for comp in walk_local(stmts) if isinstance(comp, _COMPREHENSIONS)
            for gen in comp.generators for n in ast.walk(gen.target)}


def contains(stmts: list[ast.stmt], *types: type) -> bool:
    return any(isinstance(n, types) for n in walk_local(stmts))


def ends_in_exit(stmts: list[ast.stmt]) -> bool:
    """The block cannot fall through: its last statement returns or raises (on every path)."""
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, ast.Return | ast.Raise):
        return True
    if isinstance(last, ast.If):
        return ends_in_exit(last.body) and ends_in_exit(last.orelse)
    return False


def bound_before(func: ast.FunctionDef, target: ast.stmt) -> set[str]:
    """Names bound on the way to ``target``: parameters, and stores in the statements that
    precede it in each enclosing block. A store inside an earlier ``if`` counts (it may be
    bound); stores in sibling branches of an enclosing ``if`` do not.
    """
    args = func.args
    names = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    if args.vararg:
        names.add(args.vararg.arg)
    if args.kwarg:
        names.add(args.kwarg.arg)
    path = path_to(func.body, target) or []
    for block, index in path:
        names.update(stored_names(block[:index]))
    return names


def surely_bound(func: ast.FunctionDef, target: ast.stmt) -> set[str]:
    """Names certainly bound when ``target`` runs: parameters, and what the statements before
    it in each enclosing block always bind (an ``if`` binds what both its sides bind; a loop
    or ``try`` body may not run; a ``del`` unbinds)."""
    args = func.args
    names = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    names |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    for block, index in path_to(func.body, target) or []:
        for stmt in block[:index]:
            names = (names | _always_stored(stmt)) - _deleted(stmt)
    return names


def _always_stored(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, ast.If):
        both = [set().union(*map(_always_stored, side)) if side else set()
                for side in (stmt.body, stmt.orelse)]
        return both[0] & both[1]
    if isinstance(stmt, ast.With | ast.AsyncWith):
        return set(stored_names([stmt]))
    if isinstance(stmt, ast.For | ast.AsyncFor | ast.While | ast.Try | ast.Match):
        return set()
    scoped = _comprehension_targets([stmt])
    return {n.id for n in walk_local([stmt]) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Store) and id(n) not in scoped} | (
        {stmt.name} if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        else set())


def _deleted(stmt: ast.stmt) -> set[str]:
    return {n.id for n in walk_local([stmt]) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Del)}


def path_to(block: list[ast.stmt], target: ast.stmt):
    for i, stmt in enumerate(block):
        if stmt is target:
            return [(block, i)]
        if isinstance(stmt, SCOPES):
            continue
        for field_name in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, field_name, None)
            if isinstance(inner, list) and inner:
                found = path_to(inner, target)
                if found is not None:
                    return [(block, i)] + found
        for handler in getattr(stmt, "handlers", []) or []:
            found = path_to(handler.body, target)
            if found is not None:
                return [(block, i)] + found
    return None


def name(id_: str, store: bool = False) -> ast.Name:
    return ast.Name(id=id_, ctx=ast.Store() if store else ast.Load())


RT_NAME = "__stitch_rt__"  # rewritten code's name for stitch.synthesize.operators.runtime


def rt(attr: str) -> ast.Attribute:
    """``__stitch_rt__.<attr>``"""
    return ast.Attribute(value=name(RT_NAME), attr=attr, ctx=ast.Load())


def rt_call(attr: str, *args: ast.expr, **kwargs: ast.expr) -> ast.Call:
    return ast.Call(func=rt(attr), args=list(args),
                    keywords=[ast.keyword(arg=k, value=v) for k, v in kwargs.items()])


def is_rt_call(node: ast.AST, *attrs: str) -> bool:
    """``node`` is a call of the runtime's ``attrs`` (``__stitch_rt.cond(...)``, ...)."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in attrs and isinstance(node.func.value, ast.Name)
            and node.func.value.id == RT_NAME)


def tuple_of(names: list[str], store: bool = False) -> ast.Tuple:
    return ast.Tuple(elts=[name(n, store) for n in names],
                     ctx=ast.Store() if store else ast.Load())


def located(node: ast.AST, like: ast.AST) -> ast.AST:
    """Give ``node`` and its new children (those without a position) a position: a new node
    takes that of its nearest positioned ancestor, ``like`` above ``node``; original
    statements moved inside keep their own lines, and so do the new expressions inside them
    (a runtime call put in a moved loop's count is that loop's line, not the enclosing
    ``if``'s: a guard made there names the loop). A new simple statement or expression gets
    the first line only: one spanning several lines makes Dynamo number the lines of the
    resume functions after a break in it wrongly (Python 3.11), so a print after a rewritten
    loop was reported four lines down and not recognised."""
    todo = [(node, like)]
    while todo:
        child, near = todo.pop()
        if getattr(child, "lineno", None) is None and "lineno" in child._attributes:
            ast.copy_location(child, near)
            child.end_lineno = (getattr(near, "end_lineno", near.lineno)
                                if isinstance(child, ast.stmt) and hasattr(child, "body")
                                else near.lineno)
            child.end_col_offset = getattr(near, "end_col_offset", 0)
            if child.end_lineno == child.lineno and (child.end_col_offset or 0) < (child.col_offset or 0):
                # ``near`` ends on a later line, left of where it starts: one line, one column
                child.end_col_offset = child.col_offset
        elif getattr(child, "lineno", None) is not None and child is not node:
            near = child
        todo.extend((grand, near) for grand in ast.iter_child_nodes(child))
    return node


def function_def(fn_name: str, params: list[str], body: list[ast.stmt]) -> ast.FunctionDef:
    """``def fn_name(params): body`` (positional parameters only)."""
    args = ast.arguments(posonlyargs=[], args=[ast.arg(p) for p in params], vararg=None,
                         kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
    return ast.FunctionDef(name=fn_name, args=args, body=body, decorator_list=[],
                           returns=None, type_params=[])


CHAIN_OPS = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq",
             ast.NotEq: "ne"}


def boolean(test: ast.expr, sizes: bool | str = False) -> ast.expr:
    """``a and b`` / ``a or b`` / ``not a`` -> tensor-aware logical ops, short-circuit kept.
    ``sizes``: the test is one on sizes torch.export would decide (``size_pred``): numbers
    that follow a dynamic dimension are kept as predicates too, not decided by a guard;
    ``"symbolic"``: their truth is kept a ``SymBool`` (a value, not yet a test)."""
    flag = [ast.keyword("sizes", ast.Constant(sizes))] if sizes else []
    if isinstance(test, ast.BoolOp):
        op = "logical_and" if isinstance(test.op, ast.And) else "logical_or"
        lazies = [thunk(boolean(v, sizes)) for v in test.values]
        call = rt_call(op, *lazies)
        if any(may_raise(_constant_divisors_as_adds(v)) for v in test.values[1:]):
            # only computed where Python would
            call.keywords = [ast.keyword("guarded", ast.Constant(True))]
        call.keywords += flag
        return call
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        call = rt_call("logical_not", boolean(test.operand, sizes))
        call.keywords = flag
        return call
    if (sizes and isinstance(test, ast.Call) and isinstance(test.func, ast.Name)
            and test.func.id in ("any", "all") and len(test.args) == 1 and not test.keywords
            and isinstance(test.args[0], ast.GeneratorExp)
            and not may_raise(_constant_divisors_as_adds(test.args[0]))):
        # over sizes nothing an item computes can raise: every item made, as a list
        items = ast.ListComp(test.args[0].elt, test.args[0].generators)
        call = rt_call("truth_of", test.func, ast.copy_location(items, test.args[0]))
        call.keywords = flag
        return call
    if (isinstance(test, ast.Call) and isinstance(test.func, ast.Name)
            and test.func.id in ("any", "all") and len(test.args) == 1 and not test.keywords
            and not isinstance(test.args[0], ast.GeneratorExp | ast.Starred)):
        # a generator keeps Python's short-circuit (later items are never made)
        call = rt_call("truth_of", test.func, test.args[0])
        call.keywords = flag
        return call
    if (isinstance(test, ast.Compare) and len(test.ops) > 1
            and all(type(op) in CHAIN_OPS for op in test.ops)):
        # ``0 < s < 5``: each operand made once, in order, each comparison's truth kept as a
        # tensor where it is data (Python would bool() the first comparison)
        parts: list[ast.expr] = [thunk(test.left)]
        for op, right in zip(test.ops, test.comparators, strict=True):
            parts += [ast.Constant(CHAIN_OPS[type(op)]), thunk(right)]
        call = rt_call("compare_chain", *parts)
        if may_raise(_constant_divisors_as_adds(test.comparators[-1])):
            # made only where the comparisons before hold
            call.keywords = [ast.keyword("guarded", ast.Constant(True))]
        call.keywords += flag
        return call
    if (sizes and isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Eq | ast.NotEq)):
        # lists of sizes compared (a cache keyed by the input's shape): item by item
        return rt_call("items_equal", test.left, test.comparators[0],
                       ast.Constant(isinstance(test.ops[0], ast.NotEq)))
    if (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], ast.In | ast.NotIn)
            and isinstance(test.comparators[0], ast.Tuple | ast.List)
            and all(isinstance(e, ast.Constant) for e in test.comparators[0].elts)):
        return rt_call("member", test.left, ast.Tuple(test.comparators[0].elts, ast.Load()),
                       ast.Constant(isinstance(test.ops[0], ast.NotIn)))
    return test


def reads_after(loop: ast.stmt, func: ast.FunctionDef, names: set[str]) -> list[ast.Name]:
    """Reads of ``names`` in ``func`` after ``loop``'s last line."""
    end = loop.end_lineno or loop.lineno
    return [n for n in walk_local(func.body)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in names
            and getattr(n, "lineno", 0) > end]


# operators on scalar reads that raise on some numbers, as Python's do (rt_arith.py)
RAISING_OPERATORS = frozenset({"/", "//", "%", "**", "<<", ">>", "*"})
# number functions on reads that never raise (rt_number_calls.py); the others check a
# domain, a range or a conversion to int
PURE_NUMBER_CALLS = frozenset({
    "abs", "float", "bool", "min", "max", "sum", "math.fabs", "math.isnan", "math.isinf",
    "math.isfinite", *(f"operator.{name}" for name in (
        "add", "sub", "neg", "pos", "lt", "le", "gt", "ge", "eq", "ne", "and_", "or_", "xor",
        "invert"))})


# an attribute of a call node: a helper that scalar reads reach, rewritten with Python's
# number rules (number_helpers.py), whose checks raise wherever it runs
HELPER_CALL = "_stitch_number_helper"


def _constant_divisors_as_adds(node: ast.expr) -> ast.expr:
    """A copy of ``node`` with ``a % k`` / ``a // k`` by a nonzero constant ``k`` written
    ``a + k``: what ``may_raise`` asks of it (those never raise)."""
    class _Swap(ast.NodeTransformer):
        def visit_BinOp(self, op: ast.BinOp) -> ast.AST:
            self.generic_visit(op)
            if isinstance(op.op, ast.Mod | ast.FloorDiv) and isinstance(op.right, ast.Constant) \
                    and isinstance(op.right.value, int | float) and op.right.value != 0:
                return ast.BinOp(op.left, ast.Add(), op.right)
            return op

    return _Swap().visit(copy.deepcopy(node))


def may_raise(node: ast.AST) -> bool:
    """Whether an expression may raise on data its surroundings rule out: an index that is
    not made of constants (``x[i]``), integer ``//`` or ``%``, a division with a rounding
    mode (at zero), ``int()`` of a read, an operator or number function on scalar reads
    that raises as Python's does or is checked for a result Python would not give, a helper
    a read reaches (its operators are checked as those are, inside it, on every input it
    is called with)."""
    for part in walk_local([node]):
        if isinstance(part, ast.Call) and getattr(part, HELPER_CALL, False):
            return True
        if isinstance(part, ast.Subscript) and any(
                isinstance(n, ast.Name | ast.Call | ast.Attribute | ast.Subscript)
                for n in ast.walk(part.slice)):
            return True
        if isinstance(part, ast.BinOp) and isinstance(part.op, ast.FloorDiv | ast.Mod):
            return True
        if isinstance(part, ast.Call) and any(k.arg == "rounding_mode" for k in part.keywords):
            return True
        if is_rt_call(part, "number_op", "number_iop") and _number_op_may_raise(part):
            return True  # an operator on reads raising as Python does (rt_arith.py)
        if is_rt_call(part, "scalar") and len(part.args) > 1 \
                and getattr(part.args[1], "id", None) == "int":
            return True  # ``int()`` of a float read raises at NaN and inf, as Python's does
        if is_rt_call(part, "number_call") and part.args \
                and getattr(part.args[0], "value", None) not in PURE_NUMBER_CALLS:
            return True
    return False


def _number_op_may_raise(call: ast.Call) -> bool:
    """Whether a ``number_op(symbol, a, b[, numbers])`` may raise (``rt_arith``): a raising
    operator whose right operand is not a constant it cannot raise on (a divisor other than
    0, a shift count of 0 or more and, for ``<<``, 0; an exponent of 0 or 1), or a product
    of two non-constants that the source shows are numbers. The int64 checks of ``+``,
    ``-``, ``*`` and ``//``, and the exact-double check of ``/`` of two ints, are not
    counted: in a torch.where's arm they hold only where the arm is taken (``arm_checks.py``), so they leave a branch a torch.where."""
    if len(call.args) < 3 or not isinstance(call.args[0], ast.Constant) \
            or call.args[0].value not in RAISING_OPERATORS:
        return False
    symbol, left, right = call.args[0].value, _constant(call.args[1]), _constant(call.args[2])
    if symbol == "*":
        numbers = len(call.args) > 3 and isinstance(call.args[3], ast.Constant) \
            and call.args[3].value is True
        return numbers and left is None and right is None
    if right is None:
        return True
    if symbol in ("/", "//", "%"):
        return right == 0
    if symbol == "**":
        return right not in (0, 1)
    return right < 0 or symbol == "<<" and right != 0


def _constant(expr: ast.expr) -> int | float | None:
    """The number a constant operand is (``-1`` included), else None."""
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        value = _constant(expr.operand)
        return None if value is None else -value
    if isinstance(expr, ast.Constant) and type(expr.value) in (int, float):
        return expr.value
    return None


def thunk(expr: ast.expr) -> ast.Lambda:
    return ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[],
                                         kw_defaults=[], kwarg=None, defaults=[]), body=expr)
