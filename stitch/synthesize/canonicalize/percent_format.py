"""printf-style text in a print, log or warning call becomes text the epilogue formats::

    log.warning("high loss %.4f" % loss.item())
 -> log.warning(__stitch_rt__.text(("high loss ", (".4f", "")),
                                   __stitch_rt__.percent_values(loss.item())))

While a model is exported a scalar read is symbolic, and ``"%.4f" % x`` asks ``float()`` of it:
torch.export cannot decide that number ("could not guard on data-dependent expression"). As
``text`` the values become graph outputs and the epilogue formats them with the same text
``%`` gives (``formatting.percent_pieces``: flags, width, precision and type as ``format()``
specs; ``%d`` of a float takes its integer part); in eager runs ``text`` formats at once.
A right operand that is not a tuple display goes through ``percent_values``, which takes a
tuple as the arguments and anything else as the one argument, as ``%`` does. Formats the
pieces do not cover (a mapping key, ``*``, ``%c``) stay as written.
"""

from __future__ import annotations

import ast

from capture.sites import side_effect_call

from ...epilogue.formatting import percent_pieces
from ..analysis.context import RewriteContext
from ..analysis.names import rt_call, walk_local


def percent_formats(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    for node in list(walk_local(func.body)):  # exact in eager too: any call, any line
        if isinstance(node, ast.Call) and side_effect_call(node, ctx.warn_names) is not None:
            node.args = [_as_text(a) for a in node.args]


def _as_text(arg: ast.expr) -> ast.expr:
    if not (isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Mod)
            and isinstance(arg.left, ast.Constant) and isinstance(arg.left.value, str)):
        return arg
    pieces = percent_pieces(arg.left.value)
    slots = sum(isinstance(p, tuple) for p in pieces or ())
    right = arg.right
    if pieces is None or isinstance(right, ast.Dict) or (
            isinstance(right, ast.Tuple) and (len(right.elts) != slots
                                              or any(isinstance(e, ast.Starred)
                                                     for e in right.elts))):
        return arg
    values = ast.Tuple(list(right.elts), ast.Load()) if isinstance(right, ast.Tuple) \
        else rt_call("percent_values", right, ast.Constant(slots))
    made = rt_call("text", ast.Tuple([ast.Constant(p) if isinstance(p, str) else ast.Tuple(
        [ast.Constant(p[0]), ast.Constant(p[1])], ast.Load()) for p in pieces], ast.Load()),
        values)
    return ast.fix_missing_locations(ast.copy_location(made, arg))
