"""Small AST analyses the rewrites share: which names a block stores, reads, returns."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator

SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def walk_local(nodes: Iterable[ast.AST]) -> Iterator[ast.AST]:
    """ast.walk over statements, not descending into nested functions, lambdas or classes."""
    stack = list(nodes)
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, SCOPES):
            continue  # its name is stored here; its body is another scope
        stack.extend(ast.iter_child_nodes(node))


class LocalTransformer(ast.NodeTransformer):
    """A transformer of one function's own scope: a function stitch made in it (a loop body
    or a cond's arm, named ``__stitch_...``) is that scope too; any other ``def``, lambda or
    class is another scope, left as it is."""

    def visit_FunctionDef(self, node):
        return self.generic_visit(node) if node.name.startswith("__stitch_") else node

    def visit_Lambda(self, node):
        return node

    visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda


def statement_blocks(stmts: list[ast.stmt]) -> Iterator[list[ast.stmt]]:
    """``stmts`` and every statement list inside them (bodies, ``else``s, ``finally``s), not
    those of nested functions or classes."""
    yield stmts
    for node in walk_local(stmts):
        if isinstance(node, SCOPES):
            continue
        for field_name in ("body", "orelse", "finalbody"):
            block = getattr(node, field_name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                yield block


def loop_refusal(node: ast.For) -> str | None:
    """Why a ``for`` loop cannot become one graph construct as a whole (or None): it leaves
    early, has an ``else``, or unpacks into several names."""
    if node.orelse:
        return "the loop has an `else` clause"
    if contains(node.body, ast.Break, ast.Continue, ast.Return, ast.Yield, ast.YieldFrom):
        return "the body leaves the loop early (break/continue/return)"
    if not isinstance(node.target, ast.Name):
        return "the loop variable is not a plain name"
    return None


def reads_number(node: ast.AST) -> bool:
    """``node`` reads a number from a tensor: ``.item()``, or ``int``/``float``/``bool`` of
    something that is not a constant."""
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            func = call.func
            if isinstance(func, ast.Attribute) and func.attr == "item":
                return True
            if isinstance(func, ast.Name) and func.id in ("int", "float", "bool") \
                    and len(call.args) == 1 and not isinstance(call.args[0], ast.Constant):
                return True
    return False


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def stored_names(stmts: list[ast.stmt]) -> list[str]:
    """Names a block assigns (in first-seen order). A comprehension's own variables are
    its scope's, not the block's (a walrus in one binds here)."""
    out: dict[str, None] = {}
    scoped = _comprehension_targets(stmts)
    for node in walk_local(stmts):
        if id(node) in scoped:
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            out[node.id] = None
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out[node.name] = None
    return sorted(out, key=list(out).index)


def _comprehension_targets(stmts: list[ast.stmt]) -> set[int]:
    """ids of the names a comprehension's ``for`` binds: its own scope's in Python 3."""
    return {id(n) for comp in walk_local(stmts) if isinstance(comp, _COMPREHENSIONS)
            for gen in comp.generators for n in ast.walk(gen.target)}


def contains(stmts: list[ast.stmt], *types: type) -> bool:
    return any(isinstance(n, types) for n in walk_local(stmts))


def ends_in_exit(stmts: list[ast.stmt]) -> bool:
    """The block cannot fall through: its last statement returns or raises (on every path)."""
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, ast.Return | ast.Raise):
        return True
    if isinstance(last, ast.If):
        return ends_in_exit(last.body) and ends_in_exit(last.orelse)
    return False


def bound_before(func: ast.FunctionDef, target: ast.stmt) -> set[str]:
    """Names bound on the way to ``target``: parameters, and stores in the statements that
    precede it in each enclosing block. A store inside an earlier ``if`` counts (it may be
    bound); stores in sibling branches of an enclosing ``if`` do not. A name the function
    declares ``nonlocal`` is bound in the function around it (a closure's counter): a branch
    carries it in and out like a local, and the store after the cond reaches its cell.
    """
    args = func.args
    names = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    if args.vararg:
        names.add(args.vararg.arg)
    if args.kwarg:
        names.add(args.kwarg.arg)
    names |= nonlocal_names(func)
    path = path_to(func.body, target) or []
    for block, index in path:
        names.update(stored_names(block[:index]))
    return names


def nonlocal_names(func: ast.FunctionDef) -> set[str]:
    """Names ``func`` declares ``nonlocal``."""
    return {n for node in walk_local(func.body) if isinstance(node, ast.Nonlocal)
            for n in node.names}


def surely_bound(func: ast.FunctionDef, target: ast.stmt) -> set[str]:
    """Names certainly bound when ``target`` runs: parameters, and what the statements before
    it in each enclosing block always bind (an ``if`` binds what both its sides bind; a loop
    or ``try`` body may not run; a ``del`` unbinds)."""
    args = func.args
    names = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    names |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    for block, index in path_to(func.body, target) or []:
        for stmt in block[:index]:
            names = (names | _always_stored(stmt)) - _deleted(stmt)
    return names


def _always_stored(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, ast.If):
        both = [set().union(*map(_always_stored, side)) if side else set()
                for side in (stmt.body, stmt.orelse)]
        return both[0] & both[1]
    if isinstance(stmt, ast.With | ast.AsyncWith):
        return set(stored_names([stmt]))
    if isinstance(stmt, ast.For | ast.AsyncFor | ast.While | ast.Try | ast.Match):
        return set()
    scoped = _comprehension_targets([stmt])
    return {n.id for n in walk_local([stmt]) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Store) and id(n) not in scoped} | (
        {stmt.name} if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        else set())


def _deleted(stmt: ast.stmt) -> set[str]:
    return {n.id for n in walk_local([stmt]) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Del)}


def path_to(block: list[ast.stmt], target: ast.stmt):
    for i, stmt in enumerate(block):
        if stmt is target:
            return [(block, i)]
        if isinstance(stmt, SCOPES):
            continue
        for field_name in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, field_name, None)
            if isinstance(inner, list) and inner:
                found = path_to(inner, target)
                if found is not None:
                    return [(block, i)] + found
        for handler in getattr(stmt, "handlers", []) or []:
            found = path_to(handler.body, target)
            if found is not None:
                return [(block, i)] + found
    return None


def name(id_: str, store: bool = False) -> ast.Name:
    return ast.Name(id=id_, ctx=ast.Store() if store else ast.Load())


RT_NAME = "__stitch_rt__"  # rewritten code's name for stitch.synthesize.operators.runtime


def rt(attr: str) -> ast.Attribute:
    """``__stitch_rt__.<attr>``"""
    return ast.Attribute(value=name(RT_NAME), attr=attr, ctx=ast.Load())


def rt_call(attr: str, *args: ast.expr, **kwargs: ast.expr) -> ast.Call:
    return ast.Call(func=rt(attr), args=list(args),
                    keywords=[ast.keyword(arg=k, value=v) for k, v in kwargs.items()])


def is_rt_call(node: ast.AST, *attrs: str) -> bool:
    """``node`` is a call of the runtime's ``attrs`` (``__stitch_rt.cond(...)``, ...)."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in attrs and isinstance(node.func.value, ast.Name)
            and node.func.value.id == RT_NAME)


def tuple_of(names: list[str], store: bool = False) -> ast.Tuple:
    return ast.Tuple(elts=[name(n, store) for n in names],
                     ctx=ast.Store() if store else ast.Load())


def located(node: ast.AST, like: ast.AST) -> ast.AST:
    """Give ``node`` and its new children (those without a position) a position: a new node
    takes that of its nearest positioned ancestor, ``like`` above ``node``; original
    statements moved inside keep their own lines, and so do the new expressions inside them
    (a runtime call put in a moved loop's count is that loop's line, not the enclosing
    ``if``'s: a guard made there names the loop). A new simple statement or expression gets
    the first line only: one spanning several lines makes Dynamo number the lines of the
    resume functions after a break in it wrongly (Python 3.11), so a print after a rewritten
    loop was reported four lines down and not recognised."""
    todo = [(node, like)]
    while todo:
        child, near = todo.pop()
        if getattr(child, "lineno", None) is None and "lineno" in child._attributes:
            ast.copy_location(child, near)
            child.end_lineno = (getattr(near, "end_lineno", near.lineno)
                                if isinstance(child, ast.stmt) and hasattr(child, "body")
                                else near.lineno)
            child.end_col_offset = getattr(near, "end_col_offset", 0)
            if child.end_lineno == child.lineno and (child.end_col_offset or 0) < (child.col_offset or 0):
                # ``near`` ends on a later line, left of where it starts: one line, one column
                child.end_col_offset = child.col_offset
        elif getattr(child, "lineno", None) is not None and child is not node:
            near = child
        todo.extend((grand, near) for grand in ast.iter_child_nodes(child))
    return node


def function_def(fn_name: str, params: list[str], body: list[ast.stmt]) -> ast.FunctionDef:
    """``def fn_name(params): body`` (positional parameters only)."""
    args = ast.arguments(posonlyargs=[], args=[ast.arg(p) for p in params], vararg=None,
                         kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
    return ast.FunctionDef(name=fn_name, args=args, body=body, decorator_list=[],
                           returns=None, type_params=[])


def reads_after(loop: ast.stmt, func: ast.FunctionDef, names: set[str]) -> list[ast.Name]:
    """Reads of ``names`` in ``func`` after ``loop``'s last line."""
    end = loop.end_lineno or loop.lineno
    return [n for n in walk_local(func.body)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in names
            and getattr(n, "lineno", 0) > end]


def thunk(expr: ast.expr) -> ast.Lambda:
    return ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[],
                                         kw_defaults=[], kwarg=None, defaults=[]), body=expr)
