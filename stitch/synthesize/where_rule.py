"""The cost rule that picks ``torch.where`` over ``torch.cond`` (data, then one function):
both arms cheap, pure, elementwise, assigning the same names::

    if p: h = h * 2        ->    h = torch.where(p, h * 2, h - 1)
    else: h = h - 1
"""

from __future__ import annotations

import ast

from .names import may_raise, stored_names, walk_local

WHERE_MAX_NODES = 40
PURE_CALLS = frozenset({
    "abs", "exp", "log", "sqrt", "rsqrt", "relu", "sigmoid", "tanh", "sin", "cos", "neg",
    "clamp", "clamp_min", "clamp_max", "where", "maximum", "minimum", "pow", "square", "sign",
    "gelu", "silu", "softplus", "mul", "add", "sub", "div", "float", "half", "to",
})


def predication_mode(node: ast.If, assigned: list[str]) -> tuple[str, str]:
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
    # torch.where computes both arms: one that can raise on the input the test rules out
    # (``x[i]`` past the end where the test checks ``i < 3``, ``x // d`` at d=0) would
    # raise where the model takes the other arm
    if any(may_raise(s) for s in node.body + node.orelse):
        return "cond", ("torch.cond: an arm may raise where the test rules it out (a computed "
                        "index, integer // or %, a division with a rounding mode)")
    for call in (c for c in walk_local(node.body + node.orelse) if isinstance(c, ast.Call)):
        func = call.func
        callee = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if callee not in PURE_CALLS:
            return "cond", f"torch.cond: `{callee}` is not a known pure elementwise call"
    return "where", (f"torch.where: both arms cheap, pure, elementwise ({size} nodes <= "
                     f"{WHERE_MAX_NODES}); falls back to cond if shapes differ at trace time")
