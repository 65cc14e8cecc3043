"""Each arm of a cond on a size knows its test: the first statement of the arm re-states it.

    if box_sum > 0:                      def __stitch_true_2(rel_codes, box_sum):
        rel_codes = rel_codes.reshape(       __stitch_rt__.holds(box_sum > 0, True)
            box_sum, -1)                     rel_codes = rel_codes.reshape(box_sum, -1)

torch.cond traces each arm with the numbers it takes as fresh symbols (a size carried in is
read back as an unbacked int), knowing nothing of the test that chose the arm, so
``reshape(box_sum, -1, 4)`` cannot tell that ``box_sum`` is not 0 ("Could not guard on
data-dependent expression Ne(4*u5, 0)"; torchvision's ``BoxCoder.decode``). ``holds`` notes
the test on the arm's own values where it is symbolic (its negation in the false arm), and
capture/branch_asserts.py decides that arm's guards with it. Nothing is asserted: the fact
is true wherever the arm runs, and kept out of the ShapeEnv it cannot reach the other arm or
the rest of the graph. On Python values, and on tensors, ``holds`` does nothing.

Only for a test that reads nothing but the arm's parameters, through comparisons, boolean
operators, arithmetic, attributes, subscripts and size queries (``len``, ``.numel()``,
``.size()``, ``.dim()``): re-evaluating it has no effect and costs nothing.
"""

from __future__ import annotations

import ast
import copy

from ..analysis.names import RT_NAME as RT
from ..analysis.names import rt_call

_PURE = (ast.Compare, ast.BoolOp, ast.UnaryOp, ast.BinOp, ast.Name, ast.Constant,
         ast.Attribute, ast.Subscript, ast.Slice, ast.Tuple, ast.Load, ast.boolop, ast.cmpop,
         ast.unaryop, ast.operator)
_SIZE_CALLS = {"numel", "size", "dim"}


def _pure(test: ast.expr) -> bool:
    for node in ast.walk(test):
        if isinstance(node, ast.Call):
            func = node.func
            if not ((isinstance(func, ast.Name) and func.id == "len") or _length(func)
                    or (isinstance(func, ast.Attribute) and func.attr in _SIZE_CALLS)):
                return False
            continue
        if not isinstance(node, _PURE):
            return False
    return True


def _length(func: ast.expr) -> bool:
    """``__stitch_rt__.length``: ``len`` as a branch's test reads it (len_to_size)."""
    return (isinstance(func, ast.Attribute) and func.attr == "length"
            and isinstance(func.value, ast.Name) and func.value.id == RT)


def assume_test(test: ast.expr, true_fn: ast.FunctionDef, false_fn: ast.FunctionDef,
                free: frozenset[str] = frozenset()) -> None:
    """Put ``holds(test, side)`` first in each arm when ``test`` can be re-stated there.
    ``free``: names an arm may read through its closure, bound once before the ``if`` and
    never rebound (an unrolled loop's index and count: ``bounded_loop``), so the arm states
    the test on the very symbol its operands' sizes carry."""
    params = {a.arg for a in true_fn.args.args} | free
    read = {n.id for n in ast.walk(test) if isinstance(n, ast.Name)} - {"len", RT}
    if not read or not read <= params or not _pure(test):
        return
    for fn, side in ((true_fn, True), (false_fn, False)):
        for part, holds in reversed(_facts(test, side)):
            fact = ast.Expr(rt_call("holds", copy.deepcopy(part), ast.Constant(holds)))
            fn.body.insert(0, ast.copy_location(fact, fn.body[0] if fn.body else test))


def _facts(test: ast.expr, side: bool) -> list[tuple[ast.expr, bool]]:
    """What an arm states of its test, one comparison at a time: stated whole, Python would
    take the truth of a symbolic size itself (a guard on it): ``not a`` came out ``side``
    where ``a`` came out the other; ``a and b`` true is ``a`` and ``b`` each true, ``a or
    b`` false each false, ``lo < n < hi`` true each comparison true. The other side of those
    says which part failed nowhere: nothing is stated."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _facts(test.operand, not side)
    if isinstance(test, ast.BoolOp):
        if side != isinstance(test.op, ast.And):
            return []
        return [fact for value in test.values for fact in _facts(value, side)]
    if isinstance(test, ast.Compare) and len(test.ops) > 1:
        if not side:
            return []
        lefts = [test.left, *test.comparators[:-1]]
        return [(ast.Compare(left, [op], [right]), True)
                for left, op, right in zip(lefts, test.ops, test.comparators, strict=True)]
    return [(test, side)]
