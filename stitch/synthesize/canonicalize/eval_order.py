"""What one statement evaluates before a call inside it, hoisted into names so that the call
becomes the first thing left to run (the caller continuation then starts right after it).

Python evaluates an expression's operands left to right, each before its parent: in
``y = torch.cat([self.proj(h), make_mask(ids)], 1)`` it reads ``torch.cat``, then runs
``self.proj(h)``, then ``make_mask(ids)``. To split the statement at ``make_mask``, what ran
before it is bound first, in the same order, and the statement reads those names::

    __stitch_pre_7_0 = torch.cat
    __stitch_pre_7_1 = self.proj(h)
    y = __stitch_pre_7_0([__stitch_pre_7_1, make_mask(ids)], 1)

Exact: every operand runs once, in its original order, and sees what it saw before (a
constant and a name local to the caller are not hoisted: the callee cannot rebind the
caller's locals; a global or free name is, as the callee could rebind it). Refused: a call
Python evaluates only on some paths or more than once (after ``and``/``or``, in either side
of ``x if c else y``, past the first comparison of a chain, inside a lambda or a
comprehension), and an expression of a kind whose order this module does not follow (an
f-string, among others).
"""

from __future__ import annotations

import ast
import copy
import itertools

from ..analysis.context import RewriteRefused


def hoisted_before(value: ast.expr, call: ast.Call, prefix: str, local_names: set[str],
                   replacement: ast.expr) -> tuple[list[tuple[str, ast.expr]], ast.expr, ast.Call]:
    """(bindings, new value, the call): ``value`` copied, each operand evaluated before
    ``call`` replaced by a name the bindings assign (in evaluation order), and the call
    itself by ``replacement``; the call is returned detached, as it was."""
    memo: dict = {}
    new = copy.deepcopy(value, memo)
    target = memo[id(call)]
    path = _path(new, target)
    if path is None:
        raise RewriteRefused("the call is not part of the statement's value")
    bindings: list[tuple[str, ast.expr]] = []
    for parent, child in itertools.pairwise(path):
        slots = _slots(parent)
        if slots is None:
            raise RewriteRefused(f"the call sits in a `{type(parent).__name__}` expression, "
                                 "whose evaluation order stitch does not follow; assign its "
                                 "value to a name first")
        order, unconditional = slots
        k = next(i for i, (holder, field, index) in enumerate(order)
                 if _get(holder, field, index) is child)
        if k >= unconditional:
            raise RewriteRefused("the call runs only on some paths of its statement (after "
                                 "`and`/`or`, in a side of `if`/`else`, or past the first "
                                 "test of a comparison chain); assign its value to a name "
                                 "first")
        for holder, field, index in order[:k]:
            operand = _get(holder, field, index)
            if isinstance(operand, ast.Starred | ast.keyword):  # `*a`, `k=v`, `**d`: a, v, d
                holder, field, index, operand = operand, "value", None, operand.value
            if operand is None or isinstance(operand, ast.Constant) or (
                    isinstance(operand, ast.Name) and operand.id in local_names):
                continue
            temp = f"{prefix}{len(bindings)}"
            bindings.append((temp, operand))
            _set(holder, field, index, ast.Name(temp, ast.Load()))
        if child is target:
            _set(*order[k], replacement)
    return bindings, replacement if new is target else new, target


def _path(root: ast.AST, target: ast.AST) -> list[ast.AST] | None:
    if root is target:
        return [root]
    for child in ast.iter_child_nodes(root):
        found = _path(child, target)
        if found is not None:
            return [root, *found]
    return None


def _get(holder: ast.AST, field: str, index: int | None):
    value = getattr(holder, field)
    return value if index is None else value[index]


def _set(holder: ast.AST, field: str, index: int | None, new: ast.expr) -> None:
    if index is None:
        setattr(holder, field, new)
    else:
        getattr(holder, field)[index] = new


def _each(node: ast.AST, field: str) -> list[tuple[ast.AST, str, int | None]]:
    return [(node, field, i) for i in range(len(getattr(node, field)))]


def _slots(node: ast.AST) -> tuple[list[tuple[ast.AST, str, int | None]], int] | None:
    """The operands of ``node`` in the order Python evaluates them, and how many of them it
    always evaluates (the rest only on some paths); None for a kind not followed."""
    one = [(node, "value", None)]
    match node:
        case ast.Call():
            order = [(node, "func", None), *_each(node, "args"), *_each(node, "keywords")]
        case ast.keyword() | ast.Attribute() | ast.Starred():
            order = one
        case ast.Subscript():
            order = [(node, "value", None), (node, "slice", None)]
        case ast.Slice():
            order = [(node, f, None) for f in ("lower", "upper", "step")]
        case ast.BinOp():
            order = [(node, "left", None), (node, "right", None)]
        case ast.UnaryOp():
            order = [(node, "operand", None)]
        case ast.Tuple() | ast.List() | ast.Set():
            order = _each(node, "elts")
        case ast.Dict():
            order = [s for i in range(len(node.keys)) for s in
                     ([(node, "keys", i)] if node.keys[i] is not None else [])
                     + [(node, "values", i)]]
        case ast.BoolOp():
            return _each(node, "values"), 1
        case ast.IfExp():
            return [(node, "test", None), (node, "body", None), (node, "orelse", None)], 1
        case ast.Compare():
            return [(node, "left", None), *_each(node, "comparators")], 2
        case _:
            return None
    return order, len(order)
