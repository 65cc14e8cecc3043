"""Which expressions of a function are scalar reads and which are Python numbers, by the
source: the analysis ``number_ops`` routes operators by (a read kept as a 0-d tensor was a
number in the model; an operator on it keeps Python's number rules)."""

from __future__ import annotations

import ast

from ..analysis.names import is_rt_call, walk_local
from ..operators.rt_number_calls import CALLS

BINARY = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
          ast.Mod: "%", ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>",
          ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}
UNARY = {ast.USub: "-", ast.UAdd: "+", ast.Invert: "~"}
COMPARE = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
           ast.NotEq: "!="}
_SOURCES = ("scalar", "extreme", "number_op", "number_iop", "number_unary",
            "number_compare", "number_call", "number_either")



def number_function(call: ast.Call, aliases: dict[str, str]) -> str | None:
    """The name ``rt_number_calls.CALLS`` knows ``call``'s function by (``abs``,
    ``math.floor``, ``operator.add``; ``floor`` where the module did ``from math import
    floor``), where it passes plain positional arguments."""
    func = call.func
    if call.keywords or any(isinstance(a, ast.Starred) for a in call.args) or not call.args:
        return None
    name = func.id if isinstance(func, ast.Name) else \
        f"{func.value.id}.{func.attr}" if isinstance(func, ast.Attribute) \
        and isinstance(func.value, ast.Name) else None
    name = aliases.get(name, name)
    return name if name in CALLS else None


def number_names(func: ast.FunctionDef, aliases: dict[str, str]) -> set[str]:
    """Names that are Python numbers wherever the model binds them: every binding in this
    function is ``name = <number expression>``, ``name op= <number expression>`` or an
    unpacking of a tuple of them into names (not a parameter, loop target,
    ``global``/``nonlocal`` or walrus)."""
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
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            for name, value in _pairs(node.targets[0], node.value):
                values.setdefault(name, []).append(value)
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
            if not all(is_number(v, names, aliases) for v in values[name]):
                names.discard(name)
                changed = True
    return names


def _pairs(target: ast.expr, value: ast.expr) -> list[tuple[str, ast.expr]]:
    """The (name, value) bindings of ``target = value``: a name, or a tuple/list of
    targets unpacking a tuple/list display of as many values."""
    if isinstance(target, ast.Name):
        return [(target.id, value)]
    if isinstance(target, ast.Tuple | ast.List) and isinstance(value, ast.Tuple | ast.List) \
            and len(target.elts) == len(value.elts) \
            and not any(isinstance(e, ast.Starred) for e in target.elts + value.elts):
        return [p for t, v in zip(target.elts, value.elts, strict=True) for p in _pairs(t, v)]
    return []


def is_number(expr: ast.expr, names: set[str], aliases: dict[str, str]) -> bool:
    """Whether ``expr`` is a Python number in the model by its source alone."""
    if isinstance(expr, ast.Constant):
        return type(expr.value) in (bool, int, float)
    if isinstance(expr, ast.Name):
        return expr.id in names
    if is_rt_call(expr, "scalar"):
        return True
    if is_rt_call(expr, "extreme"):
        return all(is_number(a, names, aliases) for a in expr.args[1:])
    if isinstance(expr, ast.Call) and number_function(expr, aliases) is not None:
        return all(is_number(a, names, aliases) for a in expr.args)
    if isinstance(expr, ast.BinOp):
        return type(expr.op) in BINARY and is_number(expr.left, names, aliases) \
            and is_number(expr.right, names, aliases)
    if isinstance(expr, ast.UnaryOp):
        return not isinstance(expr.op, ast.Not) and is_number(expr.operand, names, aliases)
    if isinstance(expr, ast.Compare):
        return all(type(op) in COMPARE for op in expr.ops) \
            and all(is_number(o, names, aliases) for o in [expr.left, *expr.comparators])
    if isinstance(expr, ast.IfExp):
        return is_number(expr.body, names, aliases) and is_number(expr.orelse, names, aliases)
    return False


def read_names(func: ast.FunctionDef, aliases: dict[str, str],
                seeds: frozenset[str] = frozenset(),
                calls: frozenset[int] = frozenset()) -> set[str]:
    """Names this function binds from a read (or from a name that holds one), whatever
    else they are bound to elsewhere: the runtime decides per value. ``seeds``: names that
    hold reads from the start (a helper's parameters); ``calls``: ids of helper calls whose
    results count as reads."""
    names: set[str] = set(seeds)
    changed = True
    while changed:
        changed = False
        for node in walk_local(func.body):
            for target, value in _bindings(node):
                if from_read(value, names, aliases, calls):
                    for name in _bound(target):
                        if name not in names:
                            names.add(name)
                            changed = True
    return names


def _bindings(node: ast.AST) -> list[tuple[ast.expr, ast.expr]]:
    """(target, value) of each binding ``node`` makes: assignments, loops and
    comprehensions (their targets take the iterable's items), walruses, and a container's
    ``append``/``extend``/``insert``/``add`` (it then holds the arguments)."""
    if isinstance(node, ast.Assign):
        return [(t, node.value) for t in node.targets]
    if isinstance(node, ast.AnnAssign | ast.AugAssign) and node.value is not None:
        return [(node.target, node.value)]
    if isinstance(node, ast.For | ast.comprehension):
        return [(node.target, node.iter)]
    if isinstance(node, ast.NamedExpr):
        return [(node.target, node.value)]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr in _FILLS and isinstance(node.func.value, ast.Name):
        return [(node.func.value, ast.Tuple(node.args, ast.Load()))]
    return []


# methods that put their arguments into a container (``vals.append(k)``)
_FILLS = frozenset({"append", "extend", "insert", "add"})


def _bound(target: ast.expr) -> list[str]:
    """The names a target binds, and the container a subscript target writes into
    (``vals[0] = k``: ``vals`` then holds a read)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Tuple | ast.List):
        return [n for e in target.elts for n in _bound(e)]
    if isinstance(target, ast.Starred):
        return _bound(target.value)
    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
        return [target.value.id]
    return []


def from_read(expr: ast.expr, names: set[str], aliases: dict[str, str],
               calls: frozenset[int] = frozenset()) -> bool:
    """Whether a number-valued part of ``expr`` comes from a read: through operators,
    comparisons, conditional expressions, ``and``/``or``, the number functions
    ``number_function`` names, a helper a read reaches (``calls``), containers and their
    items; not through other calls or attributes (a tensor op on a read is a tensor)."""
    def read(e: ast.expr) -> bool:
        return from_read(e, names, aliases, calls)

    if isinstance(expr, ast.Name):
        return expr.id in names
    if isinstance(expr, ast.Call):
        return is_rt_call(expr, *_SOURCES) or id(expr) in calls \
            or number_function(expr, aliases) is not None and any(map(read, expr.args))
    if isinstance(expr, ast.BinOp):
        return read(expr.left) or read(expr.right)
    if isinstance(expr, ast.UnaryOp):
        return read(expr.operand)
    if isinstance(expr, ast.Compare):
        return any(map(read, [expr.left, *expr.comparators]))
    if isinstance(expr, ast.IfExp):
        return read(expr.body) or read(expr.orelse)
    if isinstance(expr, ast.BoolOp):
        return any(map(read, expr.values))
    if isinstance(expr, ast.Tuple | ast.List | ast.Set):
        return any(map(read, expr.elts))
    if isinstance(expr, ast.Dict):
        return any(map(read, expr.values))
    if isinstance(expr, ast.Starred | ast.Subscript):
        return read(expr.value)
    if isinstance(expr, ast.ListComp | ast.SetComp | ast.GeneratorExp):
        return read(expr.elt)
    if isinstance(expr, ast.DictComp):
        return read(expr.value)
    return False


def read_value(expr: ast.expr, names: set[str], aliases: dict[str, str],
                calls: frozenset[int]) -> bool:
    """Whether ``expr`` gives a read itself (a function returning it makes its callers'
    operators on the result Python's, ``returned_reads.py``): a read, an operator or number
    function of reads and number constants, either side of a conditional expression, an
    item of a tuple or list; not a tensor operation that mixes a read in (``t * k``)."""
    def read(e: ast.expr) -> bool:
        return read_value(e, names, aliases, calls)

    def part(e: ast.expr) -> bool:
        return read(e) or isinstance(e, ast.Constant) and type(e.value) in (bool, int, float)

    if isinstance(expr, ast.Name):
        return expr.id in names
    if isinstance(expr, ast.Call):
        return is_rt_call(expr, *_SOURCES) or id(expr) in calls \
            or number_function(expr, aliases) is not None and all(map(part, expr.args)) \
            and any(map(read, expr.args))
    operands = [expr.left, expr.right] if isinstance(expr, ast.BinOp) else \
        [expr.operand] if isinstance(expr, ast.UnaryOp) else \
        [expr.left, *expr.comparators] if isinstance(expr, ast.Compare) else None
    if operands is not None:
        return all(map(part, operands)) and any(map(read, operands))
    if isinstance(expr, ast.IfExp):
        return read(expr.body) or read(expr.orelse)
    if isinstance(expr, ast.Tuple | ast.List):
        return any(map(read, expr.elts))
    return False


def truth_positions(func: ast.FunctionDef) -> set[int]:
    """ids of the expressions only tested for truth (``if``/``while``/``assert`` tests,
    conditional-expression and comprehension conditions, and the operands of ``not`` and
    of ``and``/``or`` there): a comparison there stays as written, unless its kinds may
    mix (a float constant, or reads on both sides: an int and a float compare exactly)."""
    found: set[int] = set()

    def mark(expr: ast.expr) -> None:
        found.add(id(expr))
        if isinstance(expr, ast.BoolOp):
            for value in expr.values:
                mark(value)
        elif isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
            mark(expr.operand)

    for node in walk_local(func.body):
        if isinstance(node, ast.If | ast.While | ast.IfExp | ast.Assert):
            mark(node.test)
        elif isinstance(node, ast.comprehension):
            for test in node.ifs:
                mark(test)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            mark(node.operand)
    return found


def float_constant(expr: ast.expr) -> bool:
    """``0.5``, ``-1e9``: compared with an int read, a tensor compares in float32."""
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub | ast.UAdd):
        expr = expr.operand
    return isinstance(expr, ast.Constant) and type(expr.value) is float
