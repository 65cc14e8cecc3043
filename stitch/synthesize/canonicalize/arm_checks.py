"""Checks on Python numbers inside the arm of a ``torch.where`` fire only where that arm is
taken::

    if k > 100:                 def __stitch_true_1(x, k):
        y = x * (k + 1)             __stitch_when_1_t = __stitch_rt__.arm_when("S1",
                                        __stitch_pred_1, True)
                                    y = x * __stitch_rt__.number_op("+", k, 1, True,
                                                                  when=__stitch_when_1_t)

A ``torch.where`` computes both arms on every input. An operator on scalar reads checks
what Python would do differently (``k + 1`` past int64's range, ``rt_arith``), and the arm
the model does not take must not raise: where ``when`` does not hold, the operator works on
1s (``rt_arith.calm``), whose results the select throws away. A branch nested in the arm
ands its own condition with the arm's (``outer=``).

A branch holding only checks folds into them (``fold_checks``): its checks and their
operands are computed on every input, so they are gated the same way.
"""

from __future__ import annotations

import ast

from ..analysis.names import is_rt_call, name, rt_call

NUMBER_CALLS = ("number_op", "number_iop", "number_unary", "number_call")


def gate(body: list[ast.stmt], label: str, pred_name: str, side: bool, n: int,
         folded: bool = False) -> list[ast.stmt]:
    """``body`` (an arm's statements, or a folded branch's checks) with its number
    operators gated on the arm being taken; unchanged where it holds none."""
    var = f"__stitch_when_{n}_{'t' if side else 'f'}"
    tree = ast.Module(body=body, type_ignores=[])
    calls = [c for c in ast.walk(tree) if is_rt_call(c, *NUMBER_CALLS)
             and not any(k.arg == "when" for k in c.keywords)]
    inner = [c for c in ast.walk(tree) if is_rt_call(c, "arm_when")
             and not any(k.arg == "outer" for k in c.keywords)]
    if not calls and not inner:
        return body
    for call in calls:
        call.keywords.append(ast.keyword(arg="when", value=name(var)))
    for call in inner:
        call.keywords.append(ast.keyword(arg="outer", value=name(var)))
    when = rt_call("arm_when", ast.Constant(label), name(pred_name), ast.Constant(side),
                   **({"folded": ast.Constant(True)} if folded else {}))
    first = body[0] if body else None
    stmt = ast.Assign(targets=[name(var, True)], value=when)
    if first is not None:
        ast.copy_location(stmt, first)
    return [stmt, *body]


def gate_arms(true_fn: ast.FunctionDef, false_fn: ast.FunctionDef, label: str,
              pred_name: str, n: int) -> None:
    """The arms of a branch that became a ``torch.where``, gated in place."""
    for fn, side in ((true_fn, True), (false_fn, False)):
        fn.body = gate(fn.body, label, pred_name, side, n)
