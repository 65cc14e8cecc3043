"""A test on an input's size whose general arm is tried alone at every size.

Models pad to a multiple, crop to a bound, or take a short path at one size under a test on
the size whose general arm is right on both sides (Longformer's ``if padding_len > 0:`` pads
by zero where it does not pad; TinyViT's ``if H == window and W == window:`` skips the
window partition that, at that size, makes one window). torch.export decides such a test for
the examples' sizes, and a cond on the size gives its arms sizes later ops cannot relate (a
padded length's divisibility is lost). Where the examples took the special side (the
side fewer sizes take: ``padding_len > 0`` false, ``H == window`` true), this rewrite keeps
the ``if`` as Python and, while torch.export traces, takes the general side there
(``general_side``, read with no guard): the program runs the general arm at every size,
with no guard and no cond, and the examples show it serving the special side. Where the
traced sizes take the general side, the test is as written (torch.export's guard). Eager
runs and Dynamo's census run the test as written. What the arm prints, logs or warns stays
where the model says it: each such statement is gated by the test as written, a cond on the size whose
effects the epilogue replays (``gate_effects``)::

    if padding_len > 0:                     if __stitch_rt__.general_side(padding_len > 0):
        logger.warning_once("padded")  ->       if padding_len > 0:   # a cond on the size
        x = F.pad(x, (0, padding_len))              logger.warning_once("padded")
                                                x = F.pad(x, (0, padding_len))

Nothing here says the arm is right on the other side: stitch/size_rewrite.py keeps this
program only where it accepts more sizes than the guarded one and verification finds it
exact on the examples and at the sizes it added; otherwise the cond's program stands.
"""

from __future__ import annotations

import ast
import copy

from ...plan import Action
from ..analysis.context import RewriteContext
from ..analysis.names import located, stored_names
from ..analysis.origins import negated, origin_of, tests_as
from ..analysis.truth import general_side
from ..canonicalize.len_to_size import lengths_in_test
from .branch_effects import bound_names, effect_calls

ONE_ARM = ("a test on an input's size torch.export decided for the examples: the arm "
           "most sizes take runs at every size (no guard, no cond); kept only where "
           "verification finds it exact on both sides")


def one_arm(node: ast.If, ctx: RewriteContext) -> ast.If:
    """``if test:`` -> ``if __stitch_rt__.general_side(<test's truth, symbolic>):`` (a
    conditional expression on such a line: canonicalize/ifexp_to_cond.py)."""
    test = lengths_in_test(node.test, ctx.func)
    node.test = located(general_side(test), node)
    ctx.decide(Action.ONE_ARM, node, ONE_ARM)
    return node


_GATE = "_stitch_effect_gate"  # an ``if`` gate_effects made (converted as a cond, not one arm)


def is_gate(node: ast.AST) -> bool:
    return getattr(node, _GATE, False)


def gate_effects(node: ast.If, ctx: RewriteContext) -> None:
    """Each statement of ``node``'s arms that prints, logs, warns or appends and binds no
    name, put under ``if <test>:`` (``if not (<test>):`` in the ``else``) at the test's
    line: a test on the size as written, converted as a cond with the arm's other ifs."""
    local = bound_names(ctx.func)
    for block, negate in ((node.body, False), (node.orelse, True)):
        for i, stmt in enumerate(block):
            if stored_names([stmt]) or not effect_calls([stmt], ctx.warn_names, local,
                                                        ctx.helpers):
                continue
            test = copy.deepcopy(node.test)
            if negate:
                test = ast.UnaryOp(ast.Not(), test)
            gate = ast.copy_location(ast.If(test=test, body=[stmt], orelse=[]), node)
            gate.end_lineno = node.lineno
            setattr(gate, _GATE, True)
            # the model's own test: verification forces the model's ``if`` with the gate
            origin = origin_of(node)
            if origin is not None and negate:
                negated(gate, origin)
            elif origin is not None:
                tests_as(gate, node)
            block[i] = located(gate, node)
