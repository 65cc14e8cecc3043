"""A loop over ``range(n)``, ``n`` a size known only at run time with no static bound up to
``rt_unroll.UNROLL_LIMIT`` (torchvision's Keypoint R-CNN ``heatmaps_to_keypoints``: one
iteration per detection, up to 100), whose body uses the loop variable only as the first
index of its subscripts, becomes one ``torch.while_loop``::

    for i in range(len(rois)):              __stitch_count_1 = __stitch_rt__.length(rois)
        w = int(widths[i].item())     ->    __stitch_orig_out = out
        out[i, 0] = f(maps[i], w)           def __stitch_body_1(i, out):
                                                w = int(__stitch_rt__.take(widths, i).item())
                                                out = __stitch_rt__.put(out, i, (0,),
                                                    f(__stitch_rt__.take(maps, i), w))
                                                return (out,)
                                            (out,) = __stitch_rt__.while_count("S1",
                                                __stitch_count_1, __stitch_body_1, (out,))
                                            out = __stitch_rt__.write_into(__stitch_orig_out, out)

Exact: the same iterations, in the same order, read and write the same elements. Where ``n``
is a Python int (eager, a fixed size) ``while_count`` is the plain loop, ``take`` is
``x[i]`` and ``put`` the store itself, in place. Traced, ``i`` is the loop's 0-d counter:
``take`` is ``index_select`` (indexing with a traced 0-d tensor reads it as a Python int,
which torch 2.14's while_loop body cannot keep; numbers read from what ``index_select``
gives, it keeps: measured) and ``put`` an ``index_copy`` of the row written on a copy, the
loop carrying the tensor; after the loop its values are written back into the original, so
aliases see them. The unrolled form (``bounded_loop``) stays the first choice: this one is
tried where that loop was kept (``rt_unroll.NoStaticBound``).

Refused, naming the line: the loop variable used other than as a subscript's first index
(arithmetic on it, a call, a later index), a subscript whose other indices are not plain
(only ints, slices and ``None``: an advanced index there places dimensions otherwise), a
store through such a subscript on something other than a name (``self.buf[i] = v``), an
augmented store (``out[i] += v``), a write through a read row (``out[i][0] = v``,
``out[i].add_(1)``: it would write a copy), and other in-place writes to names bound before
the loop.
"""

from __future__ import annotations

import ast
import copy

from ...plan import Action
from ..analysis.context import RewriteContext, RewriteRefused
from ..analysis.names import (
    bound_before,
    function_def,
    located,
    loop_refusal,
    name,
    rt_call,
    stored_names,
    tuple_of,
)
from .bounded_loop import count_of
from .branch_inplace import write_back_statements, written_in_place
from .tensor_loop import refuse_effects_in_loop, refuse_escapes

PLAIN_INDEX = (ast.Constant, ast.Slice)
# the decision's reason; a round holding one takes its census with scalar reads captured
INDEXED = "loop over range(n), n a size known only at run time with no static bound"


def indexed_while(node: ast.For, func: ast.FunctionDef, ctx: RewriteContext) -> list[ast.stmt]:
    why = loop_refusal(node)
    if why:
        raise RewriteRefused(why)
    target = node.target.id
    if target in stored_names(node.body):
        raise RewriteRefused(f"the body rebinds the loop variable {target!r}")
    refuse_effects_in_loop(node, ctx)
    refuse_escapes(node, func, target)
    body = copy.deepcopy(node.body)  # the loop stays as written if this is refused
    rows = _Rows(target, ctx.filename)
    body = [rows.visit(s) for s in body]
    rows.refuse_other_uses(body)
    bound = bound_before(func, node) - {target}
    left = set(written_in_place(body, ctx.writers)) & bound
    if left:
        raise RewriteRefused(
            f"the body writes {', '.join(sorted(left))} in place other than by the loop "
            "index (a while_loop body cannot write into a tensor from outside it)")
    _refuse_aliases(func, body, list(rows.stored), ctx.filename, node)
    carried = [a for a in stored_names(body) if a in bound]
    if not carried:
        raise RewriteRefused("the body carries no value from one iteration to the next")
    n = ctx.next_id()
    count = f"__stitch_count_{n}"
    stop = count_of(node)
    written = [c for c in carried if c in rows.stored]
    before, after = write_back_statements(written)
    reads = [a for a in dict.fromkeys(
        m.id for m in ast.walk(ast.Module(body, []))
        if isinstance(m, ast.Name) and isinstance(m.ctx, ast.Load))
        if a in bound and a not in carried]  # passed in: copies, traced (while_count)
    body_fn = function_def(f"__stitch_body_{n}", [target, *carried, *reads],
                           body + [ast.Return(tuple_of(carried))])
    call = rt_call("while_count", ast.Constant(ctx.label(node)), name(count),
                   name(body_fn.name), tuple_of(carried), tuple_of(reads))
    ctx.decide(Action.WHILE_LOOP, node,
               f"{INDEXED} to unroll: torch.while_loop carrying {', '.join(carried)}, its subscripts "
               f"by {target!r} read with index_select and written with index_copy (same "
               "iterations, same order, same elements)")
    return [located(s, node) for s in (
        ast.Assign([name(count, True)], stop), *before, body_fn,
        ast.Assign([tuple_of(carried, store=True)], call), *after)]


# methods that give a view of their receiver (a write through either is seen by the other)
VIEWS = frozenset({"view", "view_as", "reshape", "transpose", "permute", "narrow", "select",
                   "expand", "expand_as", "squeeze", "unsqueeze", "flatten", "unflatten",
                   "as_strided", "detach", "unbind", "split", "chunk", "t", "movedim",
                   "diagonal", "real", "imag", "contiguous", "swapaxes", "swapdims"})
VIEW_ATTRIBUTES = frozenset({"T", "mT", "H", "mH", "real", "imag", "data"})


def _view_root(expr: ast.expr) -> str | None:
    """The name whose memory ``expr`` may share (``y``, ``y[:5]``, ``y.view(-1)``, ``y.T``)."""
    while True:
        if isinstance(expr, ast.Name):
            return expr.id
        if isinstance(expr, ast.Subscript | ast.Starred) or (
                isinstance(expr, ast.Attribute) and expr.attr in VIEW_ATTRIBUTES):
            expr = expr.value
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) \
                and expr.func.attr in VIEWS:
            expr = expr.func.value
        else:
            return None


def _refuse_aliases(func: ast.FunctionDef, body: list[ast.stmt], written: list[str],
                    filename: str, node: ast.For) -> None:
    """A name sharing memory with a tensor the body writes by index (``prev = out``,
    ``col = out[:, 0]``), read in the body: in eager it sees each write at once; the
    while_loop writes a carried copy, put back after the loop. Refused."""
    links: dict[str, set[str]] = {}
    for n in ast.walk(ast.Module([*func.body, *body], [])):
        if isinstance(n, ast.Assign):
            root = _view_root(n.value)
            for t in n.targets:  # names bound (a store into x[...] copies the values)
                for tn in ([t] if isinstance(t, ast.Name) else
                           t.elts if isinstance(t, ast.Tuple | ast.List) else []):
                    if root is not None and isinstance(tn, ast.Name) and tn.id != root:
                        links.setdefault(tn.id, set()).add(root)
                        links.setdefault(root, set()).add(tn.id)
    shared, todo = set(written), list(written)
    while todo:
        for other in links.get(todo.pop(), ()):
            if other not in shared:
                shared.add(other)
                todo.append(other)
    for n in ast.walk(ast.Module(body, [])):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in shared \
                and n.id not in written:
            raise RewriteRefused(
                f"{filename}:{n.lineno}: {n.id!r} shares memory with {', '.join(written)}, "
                "which the loop writes by index: in a torch.while_loop it would not see "
                f"the writes until the loop ends (the loop at line {node.lineno}); read "
                "the written tensor itself")


class _Rows(ast.NodeTransformer):
    """``x[i, rest]`` -> ``take(x, i)[rest]``; ``x[i, rest] = v`` -> ``x = put(x, i,
    (rest,), v)``; anything else that would write through a taken row, refused."""

    def __init__(self, target: str, filename: str) -> None:
        self.target, self.filename = target, filename
        self.stored: dict[str, None] = {}

    def _refuse(self, node: ast.AST, what: str) -> RewriteRefused:
        return RewriteRefused(
            f"{self.filename}:{node.lineno}: {what}; as a torch.while_loop the loop "
            f"variable {self.target!r} is a 0-d tensor, read and written only as a "
            "subscript's first index (x[i], x[i, 0, :])")

    def _split(self, node: ast.Subscript) -> tuple[list[ast.expr]] | None:
        """The other indices of ``x[i, ...]`` (None: ``i`` is not its first index)."""
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if not (parts and isinstance(parts[0], ast.Name) and parts[0].id == self.target):
            return None
        rest = parts[1:]
        for p in rest:
            if isinstance(p, ast.UnaryOp) and isinstance(p.operand, ast.Constant):
                continue  # x[i, -1]
            if not isinstance(p, PLAIN_INDEX) or self._mentions(p):
                raise self._refuse(node, "an index after the loop variable that is not an "
                                         "int, a slice or None")
        if self._mentions(node.value):
            raise self._refuse(node, "the loop variable inside the indexed value")
        return (rest,)

    def _mentions(self, node: ast.AST) -> bool:
        return any(isinstance(n, ast.Name) and n.id == self.target for n in ast.walk(node))

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        split = self._split(node)
        if split is None:
            return self.generic_visit(node)
        if not isinstance(node.ctx, ast.Load):
            raise self._refuse(node, "a store or delete through the loop index here")
        (rest,) = split
        taken = ast.copy_location(rt_call("take", self.visit(node.value), name(self.target)),
                                  node)
        if not rest:
            return taken
        index = rest[0] if len(rest) == 1 else ast.Tuple(rest, ast.Load())
        return ast.copy_location(ast.Subscript(taken, index, ast.Load()), node)

    def visit_Assign(self, node: ast.Assign) -> ast.AST:
        [*targets] = node.targets
        if len(targets) == 1 and isinstance(targets[0], ast.Subscript) \
                and self._split(targets[0]) is not None:
            store = targets[0]
            if not isinstance(store.value, ast.Name):
                raise self._refuse(node, "a store by the loop index into something that is "
                                         "not a local name")
            (rest,) = self._split(store)
            self.stored[store.value.id] = None
            value = self.visit(node.value)
            call = rt_call("put", name(store.value.id), name(self.target),
                           ast.Tuple([_as_value(r) for r in rest], ast.Load()), value)
            return ast.copy_location(ast.Assign([name(store.value.id, True)], call), node)
        return self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        if isinstance(node.target, ast.Subscript) and self._split(node.target) is not None:
            raise self._refuse(node, "an augmented store by the loop index")
        return self.generic_visit(node)

    def refuse_other_uses(self, body: list[ast.stmt]) -> None:
        """After the rewrite the loop variable may only be ``take``/``put``'s index, and no
        taken row may be written in place (a method ending in ``_``, a store into it)."""
        allowed = set()
        for n in ast.walk(ast.Module(body, [])):
            if isinstance(n, ast.Call) and _rt_name(n) in ("take", "put"):
                allowed.add(id(n.args[1]))
        for n in ast.walk(ast.Module(body, [])):
            if isinstance(n, ast.Name) and n.id == self.target and id(n) not in allowed:
                raise self._refuse(n, "the loop variable used other than as an index")
            through = None
            if isinstance(n, ast.Subscript) and not isinstance(n.ctx, ast.Load):
                through = n.value
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr.endswith("_") and not n.func.attr.endswith("__"):
                through = n.func.value
            if through is not None and any(isinstance(m, ast.Call) and _rt_name(m) == "take"
                                           for m in ast.walk(through)):
                raise self._refuse(n, "a write into a row read by the loop index (it would "
                                      "write a copy)")


def _rt_name(call: ast.Call) -> str | None:
    f = call.func
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
            and f.value.id == "__stitch_rt__":
        return f.attr
    return None


def _as_value(index: ast.expr) -> ast.expr:
    """An index as the value it stands for (``:`` -> ``slice(None, None, None)``)."""
    if not isinstance(index, ast.Slice):
        return index
    parts = [p if p is not None else ast.Constant(None)
             for p in (index.lower, index.upper, index.step)]
    return ast.Call(name("slice"), parts, [])
