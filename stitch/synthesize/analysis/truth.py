"""The truth of a test as the rewritten code computes it (``boolean``: ``and``/``or``/``not``,
chained comparisons, ``any``/``all``, membership, all as tensor-aware calls that keep
Python's short-circuit), and whether an expression may raise on data its surroundings rule
out (``may_raise``): what decides that an operand is computed only where Python would."""

from __future__ import annotations

import ast
import copy

from .names import is_rt_call, rt_call, thunk, walk_local

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
    if (isinstance(test, ast.Call) and isinstance(test.func, ast.Name)
            and test.func.id in ("any", "all") and len(test.args) == 1 and not test.keywords
            and isinstance(test.args[0], ast.GeneratorExp)
            and not may_raise(_constant_divisors_as_adds(test.args[0]))):
        # no item can raise where Python's short-circuit would not have made it: every item
        # made, as a list (one that prints or changes state more often than the model is
        # caught by verification's text and state comparisons)
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


def general_side(test: ast.expr) -> ast.expr:
    """A test on sizes taken on the side most sizes take while torch.export traces,
    Python's as written otherwise (``rt_predicate.general_side``; convert/one_arm.py)."""
    return rt_call("general_side", boolean(test, sizes="symbolic"))


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
