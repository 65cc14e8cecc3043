"""Operators and number functions on scalar reads keep Python's number rules (``rt_arith.py``,
``rt_number_calls.py``).

After ``scalar_to_tensor`` a read is a 0-d tensor, and what the model does to it as a
number would be done to a tensor. Each operator, comparison or number function with an
operand that comes from a read in this function (not its nested functions) goes through
the runtime:

    q = k // m            ->  q = __stitch_rt__.number_op("//", k, m)
    k += 1                ->  k = __stitch_rt__.number_iop("+", k, 1)
    s = -flag             ->  s = __stitch_rt__.number_unary("-", flag)
    n = (a > 0) + b       ->  n = __stitch_rt__.number_op("+", number_compare(">", a, 0), b)
    r = abs(k)            ->  r = __stitch_rt__.number_call("abs", abs, k)
    m = k or 0            ->  m = __stitch_rt__.number_either("or", lambda: k, lambda: 0)

An operand comes from a read where it is a read (a runtime ``scalar``/``extreme`` call), a
result of one of these, or a name bound from one: by assignment, unpacking
(``a, b = n.item(), m.item()``), a container of reads (a display, a comprehension, or
``append``) and its items (``vals[0]``), a loop over one, or a walrus. A comparison in a
test (``if k > 0``) is left as written, as only its truth is used there, unless its kinds
may mix (an int read against a float: compared exactly, not in float32).

Which operands were numbers is decided when it runs (a read's tensor is marked), so a name
that is sometimes a tensor keeps the tensor's rules. Where the mark cannot be seen (in a
torch.cond arm, which torch.cond traces with Dynamo), an operator whose operands are
numbers in the model by the source alone passes ``True``: every operand is a read, a
number constant, or a name every binding of which in this function is such an expression
(``number_names``), so the runtime may take a 0-d tensor there as the number of its
dtype's kind. A read that reaches a helper as an argument is followed there
(``number_helpers.py``), and the helper's result counts as a read, as does the result of a
function that returns a read (``returned_reads.py``).
"""

from __future__ import annotations

import ast

from capture.source import module_of_file

from ..analysis.context import RewriteContext
from ..analysis.names import is_rt_call, rt_call, thunk, walk_local
from ..analysis.truth import HELPER_CALL, may_raise
from ..operators.rt_number_calls import spellings
from .number_helpers import calls_to, helper_calls, merge
from .number_reads import (
    BINARY,
    COMPARE,
    UNARY,
    float_constant,
    from_read,
    is_number,
    number_function,
    number_names,
    read_names,
    read_value,
    truth_positions,
)


def python_number_ops(func: ast.FunctionDef, ctx: RewriteContext,
                      seeds: frozenset[str] = frozenset(), depth: int = 1) -> None:
    """``seeds``: parameters that reads reach (a helper, ``number_helpers.py``); the
    helpers this function passes reads to go to ``ctx.number_helpers``."""
    if func.name == ctx.qualname.rsplit(".", 1)[-1]:  # the function, not one inside it
        seeds = seeds | ctx.read_params
    module = module_of_file(ctx.filename)
    returned = calls_to(func, module, ctx.qualname, ctx.read_returners,  # returned_reads.py
                        ctx.read_call_lines)
    if not seeds and not returned \
            and not any(is_rt_call(n, "scalar", "extreme") for n in walk_local(func.body)):
        return
    aliases = spellings(vars(module)) if module is not None else {}
    skip = ctx.helpers | frozenset(ctx.writers)
    calls: dict = {}
    while True:  # a helper's result is a read, which may reach another helper
        reads = read_names(func, aliases, seeds, frozenset(calls) | returned)
        seen = frozenset(calls) | returned
        found = helper_calls(func, module, ctx.qualname,
                             lambda e, r=reads, c=seen: from_read(e, r, aliases, c),
                             skip, depth)
        if found.keys() <= calls.keys():
            break
        calls.update(found)
    for node in walk_local(func.body):
        if id(node) in calls:  # its checks run where it runs: a where's arm would run it
            setattr(node, HELPER_CALL, True)  # on every input (truth.may_raise)
    for found_at in calls.values():
        for call in found_at:
            merge(ctx.number_helpers, call)
    sources = frozenset(calls) | returned
    ctx.returns_read = any(isinstance(n, ast.Return) and n.value is not None
                           and read_value(n.value, reads, aliases, sources)
                           for n in walk_local(func.body))
    rewriter = _Operators(reads, number_names(func, aliases), truth_positions(func), aliases,
                          sources)
    func.body = [rewriter.visit(stmt) for stmt in func.body]


class _Operators(ast.NodeTransformer):
    def __init__(self, reads: set[str], numbers: set[str], truth: set[int],
                 aliases: dict[str, str], calls: frozenset[int] = frozenset()) -> None:
        self.reads = reads
        self.numbers = numbers
        self.truth = truth
        self.aliases = aliases
        self.calls = calls

    def _numbers(self, *operands: ast.expr) -> list[ast.expr]:
        """``[True]`` where every operand is a number by the source (checked before the
        operands are rewritten), else nothing."""
        return [ast.Constant(True)] if all(is_number(o, self.numbers, self.aliases)
                                          for o in operands) else []

    def _from_read(self, *operands: ast.expr) -> bool:
        return any(from_read(o, self.reads, self.aliases, self.calls) for o in operands)

    def _skip(self, node: ast.AST) -> ast.AST:
        return node  # another scope: its names are not this function's

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = _skip

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        numbers = self._numbers(node.left, node.right)
        routed = type(node.op) in BINARY and self._from_read(node.left, node.right)
        self.generic_visit(node)
        if not routed:
            return node
        return ast.copy_location(rt_call("number_op", ast.Constant(BINARY[type(node.op)]),
                                         node.left, node.right, *numbers), node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        numbers = self._numbers(node.operand)
        routed = type(node.op) in UNARY and self._from_read(node.operand)
        self.generic_visit(node)
        if not routed:
            return node
        return ast.copy_location(rt_call("number_unary", ast.Constant(UNARY[type(node.op)]),
                                         node.operand, *numbers), node)

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        numbers = self._numbers(node.left, *node.comparators)
        operands = [node.left, *node.comparators]
        routed = len(node.ops) == 1 and type(node.ops[0]) in COMPARE \
            and self._from_read(*operands) \
            and (id(node) not in self.truth or any(map(float_constant, operands))
                 or all(map(self._from_read, operands)))
        self.generic_visit(node)
        if not routed:
            return node
        return ast.copy_location(rt_call("number_compare", ast.Constant(
            COMPARE[type(node.ops[0])]), node.left, node.comparators[0], *numbers), node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        numbers = self._numbers(*node.args) if node.args else []
        name = number_function(node, self.aliases)
        routed = name is not None and self._from_read(*node.args)
        self.generic_visit(node)
        if not routed:
            return node
        call = rt_call("number_call", ast.Constant(name), node.func, *node.args)
        call.keywords = [ast.keyword("numbers", n) for n in numbers]
        return ast.copy_location(call, node)

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        """``k or 0`` as a value (not a test, where only its truth counts): Python's result
        on reads (rt_either.py), where no later operand may raise (each is computed)."""
        numbers = self._numbers(*node.values)
        routed = id(node) not in self.truth and self._from_read(*node.values) \
            and not any(map(may_raise, node.values[1:]))
        self.generic_visit(node)
        if not routed:
            return node
        call = rt_call("number_either", ast.Constant("or" if isinstance(node.op, ast.Or)
                                                     else "and"),
                       *map(thunk, node.values))
        call.keywords = [ast.keyword("numbers", n) for n in numbers]
        return ast.copy_location(call, node)

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        numbers = self._numbers(ast.Name(node.target.id, ast.Load()), node.value) \
            if isinstance(node.target, ast.Name) else []
        self.generic_visit(node)
        symbol = BINARY.get(type(node.op))
        if symbol is None or not isinstance(node.target, ast.Name) \
                or not (node.target.id in self.reads or self._from_read(node.value)):
            return node
        value = rt_call("number_iop", ast.Constant(symbol),
                        ast.Name(node.target.id, ast.Load()), node.value, *numbers)
        return ast.copy_location(ast.Assign(targets=[node.target], value=value), node)
