"""Operators on scalar reads keep Python's number rules (``rt_arith.py``).

After ``scalar_to_tensor`` a read is a 0-d tensor, and the operators the model applies to
it as a number would apply as tensor operators. Each operator with an operand that comes
from a read — a runtime ``scalar``/``extreme`` call, or a name assigned from one, in this
function (not its nested functions) — goes through the runtime:

    q = k // m            ->  q = __stitch_rt__.number_op("//", k, m)
    k += 1                ->  k = __stitch_rt__.number_iop("+", k, 1)
    s = -flag             ->  s = __stitch_rt__.number_unary("-", flag)

Which operands were numbers is decided when it runs (a read's tensor is marked), so a name
that is sometimes a tensor keeps the tensor's operator. Where the mark cannot be seen (in a
torch.cond arm, which torch.cond traces with Dynamo), an operator whose operands are
numbers in the model by the source alone passes ``True`` last: every operand is a read, a
number constant, or a name every assignment of which in this function is such an
expression (``_number_names``), so the runtime may take a 0-d tensor there as the number
of its dtype's kind. A read that reaches another function as an argument is not followed
there.
"""

from __future__ import annotations

import ast

from .context import RewriteContext
from .names import is_rt_call, rt_call, walk_local

BINARY = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
          ast.Mod: "%", ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>"}
UNARY = {ast.USub: "-", ast.UAdd: "+", ast.Invert: "~"}
_SOURCES = ("scalar", "extreme", "number_op", "number_iop", "number_unary")


def python_number_ops(func: ast.FunctionDef, ctx: RewriteContext) -> None:
    if not any(is_rt_call(n, "scalar", "extreme") for n in walk_local(func.body)):
        return
    reads = _read_names(func)
    func.body = [_Operators(reads, _number_names(func)).visit(stmt) for stmt in func.body]


def _number_names(func: ast.FunctionDef) -> set[str]:
    """Names that are Python numbers wherever the model binds them: every binding in this
    function is ``name = <number expression>`` or ``name op= <number expression>`` (not a
    parameter, loop target, ``global``/``nonlocal``, walrus or unpacking)."""
    stores: dict[str, int] = {}
    values: dict[str, list[ast.expr]] = {}
    excluded = {a.arg for a in (func.args.posonlyargs + func.args.args
                                + func.args.kwonlyargs)}
    excluded |= {a.arg for a in (func.args.vararg, func.args.kwarg) if a is not None}
    for node in walk_local(func.body):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            stores[node.id] = stores.get(node.id, 0) + 1
        elif isinstance(node, ast.Global | ast.Nonlocal):
            excluded |= set(node.names)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):
            values.setdefault(node.targets[0].id, []).append(node.value)
        elif isinstance(node, ast.AnnAssign | ast.AugAssign) \
                and isinstance(node.target, ast.Name) and node.value is not None:
            value = node.value if isinstance(node, ast.AnnAssign) else \
                ast.BinOp(ast.Name(node.target.id, ast.Load()), node.op, node.value)
            values.setdefault(node.target.id, []).append(value)
    names = {n for n, vs in values.items() if n not in excluded and len(vs) == stores.get(n)}
    changed = True
    while changed:  # the largest set whose every value is a number expression over it
        changed = False
        for name in sorted(names):
            if not all(_is_number(v, names) for v in values[name]):
                names.discard(name)
                changed = True
    return names


def _is_number(expr: ast.expr, names: set[str]) -> bool:
    """Whether ``expr`` is a Python number in the model by its source alone."""
    if isinstance(expr, ast.Constant):
        return type(expr.value) in (bool, int, float)
    if isinstance(expr, ast.Name):
        return expr.id in names
    if is_rt_call(expr, "scalar"):
        return True
    if is_rt_call(expr, "extreme"):
        return all(_is_number(a, names) for a in expr.args[1:])
    if isinstance(expr, ast.BinOp):
        return type(expr.op) in BINARY and _is_number(expr.left, names) \
            and _is_number(expr.right, names)
    if isinstance(expr, ast.UnaryOp):
        return _is_number(expr.operand, names)
    if isinstance(expr, ast.IfExp):
        return _is_number(expr.body, names) and _is_number(expr.orelse, names)
    return False


def _read_names(func: ast.FunctionDef) -> set[str]:
    """Names this function assigns from a read (or from a name that holds one), whatever
    else they are assigned elsewhere: the runtime decides per value."""
    names: set[str] = set()
    changed = True
    while changed:
        changed = False
        for node in walk_local(func.body):
            if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign) \
                    and node.value is not None and _from_read(node.value, names):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name) and name.id not in names:
                            names.add(name.id)
                            changed = True
    return names


def _from_read(expr: ast.expr, names: set[str]) -> bool:
    """Whether a number-valued part of ``expr`` comes from a read: through operators,
    conditional expressions and ``and``/``or``; not through other calls, indexing or
    attributes (a tensor op on a read is a tensor)."""
    if isinstance(expr, ast.Name):
        return expr.id in names
    if isinstance(expr, ast.Call):
        return is_rt_call(expr, *_SOURCES)
    if isinstance(expr, ast.BinOp):
        return _from_read(expr.left, names) or _from_read(expr.right, names)
    if isinstance(expr, ast.UnaryOp):
        return _from_read(expr.operand, names)
    if isinstance(expr, ast.IfExp):
        return _from_read(expr.body, names) or _from_read(expr.orelse, names)
    if isinstance(expr, ast.BoolOp):
        return any(_from_read(v, names) for v in expr.values)
    return False


class _Operators(ast.NodeTransformer):
    def __init__(self, reads: set[str], numbers: set[str]) -> None:
        self.reads = reads
        self.numbers = numbers

    def _numbers(self, *operands: ast.expr) -> list[ast.expr]:
        """``[True]`` where every operand is a number by the source (checked before the
        operands are rewritten), else nothing."""
        return [ast.Constant(True)] if all(_is_number(o, self.numbers)
                                          for o in operands) else []

    def _skip(self, node: ast.AST) -> ast.AST:
        return node  # another scope: its names are not this function's

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = _skip

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        numbers = self._numbers(node.left, node.right)
        self.generic_visit(node)
        symbol = BINARY.get(type(node.op))
        if symbol is None or not (_from_read(node.left, self.reads)
                                  or _from_read(node.right, self.reads)):
            return node
        return ast.copy_location(rt_call("number_op", ast.Constant(symbol), node.left,
                                         node.right, *numbers), node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        numbers = self._numbers(node.operand)
        self.generic_visit(node)
        symbol = UNARY.get(type(node.op))
        if symbol is None or not _from_read(node.operand, self.reads):
            return node
        return ast.copy_location(rt_call("number_unary", ast.Constant(symbol), node.operand,
                                         *numbers), node)

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        numbers = self._numbers(ast.Name(node.target.id, ast.Load()), node.value) \
            if isinstance(node.target, ast.Name) else []
        self.generic_visit(node)
        symbol = BINARY.get(type(node.op))
        if symbol is None or not isinstance(node.target, ast.Name) \
                or not (node.target.id in self.reads or _from_read(node.value, self.reads)):
            return node
        value = rt_call("number_iop", ast.Constant(symbol),
                        ast.Name(node.target.id, ast.Load()), node.value, *numbers)
        return ast.copy_location(ast.Assign(targets=[node.target], value=value), node)

