"""Break sites: one per distinct place where Dynamo split the model, with a kind and a reason.

The kind is decided by the ordered rule table ``KIND_RULES`` (data, not code paths), from
Dynamo's graph-break type and the statement at the break's source line.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import StrEnum

from . import torch_messages as tm
from .torch_messages import matches


class BreakKind(StrEnum):
    BRANCH = "branch"  # data-dependent control flow
    SCALAR_READ = "scalar_read"  # .item(), .tolist(), int(t) ...
    SIDE_EFFECT = "side_effect"  # print, logging, warnings
    ASSERT = "assert"  # data-dependent assert / raise
    LOOP = "loop"  # trip count from a tensor
    DYNAMIC_SHAPE = "dynamic_shape"  # nonzero and friends
    UNSUPPORTED_CALL = "unsupported_call"  # a callable Dynamo cannot trace
    OTHER = "other"


class FoundBy(StrEnum):
    """Which trace named a site."""

    DYNAMO = "dynamo"  # the census's torch.compile run: Dynamo broke the graph here
    EXPORT = "export"  # torch.export stopped here, where Dynamo kept one graph
    COND_TRACE = "cond_trace"  # torch.cond traced a branch no example took


@dataclass(frozen=True)
class Hint:
    """What the user can do at a site: why it breaks (where the kind alone does not say),
    what ``stitch.export`` does there, and how to fix it by hand. Kept in parts so that a
    refusal can drop what stitch does (it did not) and keep the rest."""

    why: str = ""
    stitch_does: str = ""  # after "stitch.export ": "turns it into torch.cond"
    by_hand: str = ""

    def __str__(self) -> str:
        does = f"stitch.export {self.stitch_does}" if self.stitch_does else ""
        text = ": ".join(p for p in (self.why, does) if p)
        return text + (f"; by hand: {self.by_hand}" if self.by_hand else "")


HINTS: dict[BreakKind, Hint] = {
    BreakKind.BRANCH: Hint(
        stitch_does="turns it into torch.cond",
        by_hand="torch.cond(pred, true_fn, false_fn, operands) or torch.where for cheap, "
        "pure arms"),
    BreakKind.SCALAR_READ: Hint(
        "keep the value a 0-d tensor instead of reading it into Python "
        "(or set torch._dynamo.config.capture_scalar_outputs=True)"),
    BreakKind.SIDE_EFFECT: Hint(
        stitch_does="defers it to an epilogue that replays it after the graph",
        by_hand="return the values and print/log after the call"),
    BreakKind.ASSERT: Hint(
        stitch_does="turns it into a runtime check in the graph",
        by_hand="torch._check(...) or torch._assert_async(...)"),
    BreakKind.LOOP: Hint(
        stitch_does="turns it into torch.while_loop",
        by_hand="torch._higher_order_ops.while_loop(cond_fn, body_fn, carried)"),
    BreakKind.DYNAMIC_SHAPE: Hint(
        "data-dependent output shapes: use a fixed-size formulation "
        "(masks, torch.where) or torch._check hints on the size"),
    BreakKind.UNSUPPORTED_CALL: Hint(
        "move the call out of forward, make it a custom op "
        "(torch.library.custom_op), or use torch.compiler.allow_in_graph"),
    BreakKind.OTHER: Hint("see Dynamo's reason; torch._dynamo.explain has more detail"),
}

# torch.export (non-strict) runs the forward in Python on traced values: where Dynamo put a
# check or a size into the graph, export needs a Python bool or int and stops
EXPORT_HINTS: dict[BreakKind, Hint] = {
    BreakKind.ASSERT: Hint(
        "torch.compile keeps this check in the graph, torch.export needs its value in Python",
        "turns it into a runtime check",
        "torch._assert_async(cond, msg) for a tensor, torch._check(cond) for a size or scalar"),
    BreakKind.BRANCH: Hint(
        "torch.export cannot pick a side on a traced value", "turns it into torch.cond",
        "torch.cond, or torch._check(...) on the size so one side is known"),
    BreakKind.SCALAR_READ: Hint(
        "torch.export needs a concrete int here: keep the value a tensor, "
        "or bound it right after the read (torch._check(0 <= n), torch._check(n <= N))"),
    BreakKind.DYNAMIC_SHAPE: Hint(
        "a guard on a data-dependent size: state what holds with "
        "torch._check(...) on the size, or use a fixed-size formulation (masks, torch.where)"),
    BreakKind.LOOP: HINTS[BreakKind.LOOP],
}
EXPORT_OTHER_HINT = Hint("torch.export fails here for a reason other than a data-dependent "
                         "value (see the reason): move the call out of forward (into "
                         "__init__) or make it traceable; torch.export.draft_export lists "
                         "every failure of an export")

LOGGING_METHODS = frozenset(
    {"debug", "info", "warning", "warn", "error", "critical", "exception", "log",
     "warning_once", "info_once", "warning_advice"}
)
SCALAR_READ_METHODS = frozenset({"item", "tolist", "numpy", "__bool__", "__int__", "__float__"})
SCALAR_READ_BUILTINS = frozenset({"int", "float", "bool"})
PYTHON_VALUE_OPS = frozenset({"equal", "allclose"})  # tensor ops returning a Python bool
DYNAMIC_SHAPE_OPS = frozenset(
    {"nonzero", "argwhere", "unique", "unique_consecutive", "masked_select", "where_1arg",
     "repeat_interleave", "bincount"}
)


@dataclass(frozen=True)
class BreakSite:
    """One distinct place (file:line) where the model breaks into several graphs."""

    id: str
    kind: BreakKind
    rule: str  # which entry of KIND_RULES decided the kind
    gb_type: str  # Dynamo's graph-break type, e.g. "Data-dependent branching"
    reason: str  # Dynamo's text
    filename: str
    lineno: int
    source_line: str
    function: str  # qualified name, e.g. "LongformerSelfAttention.forward"
    module_path: str = ""  # first module (in run order) whose code hit this site
    module_paths: tuple[str, ...] = ()  # every module path that hit it
    count: int = 0  # how many times Dynamo broke here (0 for a site only torch.export found)
    call_chain: tuple[str, ...] = ()  # user frames from the compiled frame down to the site
    stopped_in: str = ""  # "file:function" of the frame Dynamo stopped in (user's or not)
    data_dependent: bool = True
    found_by: FoundBy = FoundBy.DYNAMO

    @property
    def location(self) -> str:
        return f"{self.filename}:{self.lineno}"

    @property
    def advice(self) -> Hint:
        if self.found_by is FoundBy.EXPORT:
            return EXPORT_HINTS.get(self.kind, EXPORT_OTHER_HINT)
        return HINTS[self.kind]

    @property
    def hint(self) -> str:
        return str(self.advice)

    def to_json(self) -> dict:
        out = asdict(self)
        out["kind"] = self.kind.value
        out["found_by"] = self.found_by.value
        out["hint"] = self.hint
        out["module_paths"] = list(self.module_paths)
        out["call_chain"] = list(self.call_chain)
        return out


# ---------------------------------------------------------------------------------------
# Classification
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Evidence:
    """What a rule may look at: Dynamo's type and text, and the statement at the site."""

    gb_type: str
    reason: str
    statement: ast.stmt | None
    calls: frozenset[str] = field(default_factory=frozenset)  # called names on the header
    side_effects: frozenset[str] = field(default_factory=frozenset)  # print/logger/warnings
    assert_names: frozenset[str] = field(default_factory=frozenset)  # torch._assert's names

    @property
    def text(self) -> str:
        return f"{self.gb_type}\n{self.reason}"

    @property
    def inner_type(self) -> str:
        """Dynamo's type, or for "graph break in loop" (a frame it skipped because the break
        fell inside a loop) the type of the break it met there."""
        if matches(tm.GRAPH_BREAK_IN_LOOP, self.gb_type):
            found = tm.search(tm.LOOP_BREAK_INNER, self.reason)
            if found:
                return found.group(1).strip()
        return self.gb_type

    @property
    def data_dependent(self) -> bool:
        return matches(tm.DATA_DEPENDENT_BREAK, self.inner_type)

    def stmt_is(self, *types: type) -> bool:
        return isinstance(self.statement, types)


def _raises_only(stmt: ast.stmt | None) -> bool:
    return isinstance(stmt, ast.If) and any(isinstance(s, ast.Raise) for s in stmt.body)


def torch_assert(stmt: ast.stmt | None, names: frozenset[str] = frozenset()) -> ast.Call | None:
    """The call of a ``torch._assert(condition, message)`` statement, or of one of ``names``
    (what the module binds to ``torch._assert``, plain or dotted); None for another
    statement."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) \
            and ast.unparse(stmt.value.func) in names | {"torch._assert"} \
            and 1 <= len(stmt.value.args) <= 2 and not stmt.value.keywords \
            and not any(isinstance(a, ast.Starred) for a in stmt.value.args):
        return stmt.value
    return None


def has_ifexp(stmt: ast.stmt | None) -> bool:
    return stmt is not None and any(isinstance(n, ast.IfExp) for n in _header_nodes(stmt))


def _reads(node: ast.AST) -> bool:
    """``node`` calls a scalar read (``.item()``, ``int(t)``, ``.tolist()`` ...)."""
    return any(isinstance(n, ast.Call) and (
        isinstance(n.func, ast.Name) and n.func.id in SCALAR_READ_BUILTINS
        or isinstance(n.func, ast.Attribute) and n.func.attr in SCALAR_READ_METHODS)
        for n in ast.walk(node))


def read_in_arm_only(stmt: ast.stmt | None) -> bool:
    """The statement's conditional expressions read a scalar in an arm and never in a test
    (``int(i.max()) + 1 if i.numel() > 0 else 0``): a break at a read there is the read's;
    the test was decided before it (a size, a Python value)."""
    found = [n for n in _header_nodes(stmt) if isinstance(n, ast.IfExp)] if stmt else []
    return (any(_reads(n.body) or _reads(n.orelse) for n in found)
            and not any(_reads(n.test) for n in found))


KIND_RULES: tuple[tuple[str, BreakKind, Callable[[Evidence], bool]], ...] = (
    ("side-effect call at the site", BreakKind.SIDE_EFFECT,
     lambda e: bool(e.side_effects) or matches(tm.LOGGER_CALL, e.text)),
    ("data-dependent assert", BreakKind.ASSERT,
     lambda e: e.data_dependent and (e.stmt_is(ast.Assert) or _raises_only(e.statement))),
    # ``torch._assert(x.sum() < 100, "too big")``: an assert (Dynamo names it a "Data
    # dependent operator")
    ("torch._assert on data", BreakKind.ASSERT, lambda e: torch_assert(e.statement, e.assert_names) is not None),
    # (with scalar reads captured, `range(int(n.item()))` is a size from data torch cannot
    # specialize: a "UserError" at the loop's header)
    ("loop whose trip count comes from a tensor", BreakKind.LOOP,
     lambda e: (e.data_dependent or matches(tm.SPECIALIZED_INTEGER, e.text)
                or matches(tm.GUARD_ON_DATA, e.text))
     and e.stmt_is(ast.For, ast.While)),
    # torch.equal / torch.allclose return a Python bool computed from data: Dynamo names
    # them "Data dependent operator" like nonzero, but their result is a truth value
    ("branch on an operator's data-dependent truth value", BreakKind.BRANCH,
     lambda e: matches(tm.DATA_DEPENDENT_PYTHON_VALUE, e.text)
     and (e.stmt_is(ast.If) or has_ifexp(e.statement))),
    ("operator's data-dependent Python value", BreakKind.SCALAR_READ,
     lambda e: matches(tm.DATA_DEPENDENT_PYTHON_VALUE, e.text)
     and bool(e.calls & PYTHON_VALUE_OPS)),
    ("operator with a data-dependent output shape", BreakKind.DYNAMIC_SHAPE,
     lambda e: matches(tm.DYNAMIC_SHAPE_OPERATOR, e.gb_type)
     or matches(tm.DATA_DEPENDENT_OPERATOR, e.gb_type) or (bool(e.calls & DYNAMIC_SHAPE_OPS) and not e.data_dependent)),
    # a size from data (after nonzero() or mask indexing) tested by an `if`: torch.export
    # cannot guard on it ("UserError"), torch.cond can take it as its predicate
    ("branch on a data-dependent size", BreakKind.BRANCH,
     lambda e: matches(tm.GUARD_ON_DATA, e.text) and e.stmt_is(ast.If)
     and not _raises_only(e.statement)),
    ("data-dependent branch", BreakKind.BRANCH,
     lambda e: e.data_dependent and (e.stmt_is(ast.If) or matches(tm.BRANCHING_WORDS, e.text)
                                     or has_ifexp(e.statement)
                                     and not read_in_arm_only(e.statement))),
    ("scalar read", BreakKind.SCALAR_READ,
     lambda e: e.data_dependent or bool(e.calls & (SCALAR_READ_METHODS | SCALAR_READ_BUILTINS))),
    ("call Dynamo cannot trace", BreakKind.UNSUPPORTED_CALL,
     lambda e: matches(tm.UNTRACEABLE_CALL, e.text)),
    # a torch op's own test of a size from data (``torch.cdist`` choosing its kernel by the
    # row count, "Could not guard on data-dependent expression u0*u4 > 25"), the statement no
    # test of the user's (no if, loop, assert or conditional expression): torch.export
    # decides it, with stitch's stand-ins for such ops
    ("torch op's own test of a size from data", BreakKind.DYNAMIC_SHAPE,
     lambda e: matches(tm.GUARD_ON_DATA, e.text)
     and not e.stmt_is(ast.If, ast.For, ast.While, ast.Assert) and not has_ifexp(e.statement)),
    ("no rule matched", BreakKind.OTHER, lambda e: True),
)


def classify(evidence: Evidence) -> tuple[BreakKind, str]:
    for name, kind, applies in KIND_RULES:
        if applies(evidence):
            return kind, name
    raise AssertionError("the last rule always applies")


def _header_nodes(stmt: ast.stmt):
    """AST nodes of a statement's header (for compound statements, not their bodies)."""
    if isinstance(stmt, ast.If | ast.While):
        roots = [stmt.test]
    elif isinstance(stmt, ast.For | ast.AsyncFor):
        roots = [stmt.iter]
    elif isinstance(stmt, ast.With | ast.AsyncWith):
        roots = [i.context_expr for i in stmt.items]
    elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Try):
        roots = []
    else:
        roots = [stmt]
    for root in roots:
        yield from ast.walk(root)


def called_names(stmt: ast.stmt | None) -> frozenset[str]:
    """Names called in a statement's header: ``print``, ``item``, ``warnings.warn`` ..."""
    if stmt is None:
        return frozenset()
    names: set[str] = set()
    for node in _header_nodes(stmt):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                names.add(func.id)
            elif isinstance(func, ast.Attribute):
                names.add(func.attr)
                if isinstance(func.value, ast.Name):
                    names.add(f"{func.value.id}.{func.attr}")
    return frozenset(names)


NOT_LOGGERS = frozenset({"torch", "np", "numpy", "math", "F", "nn", "functional", "operator"})


def side_effect_call(call: ast.Call, warn_names: frozenset[str] = frozenset()) -> str | None:
    """``print``, ``warnings.warn`` (also through a name in ``warn_names``: ``from warnings
    import warn``) or ``logger.<method>`` for a call that prints, warns or logs, else None.
    ``torch.log(x)`` is not one: a logger's receiver is not a math module."""
    func = call.func
    if isinstance(func, ast.Name):
        return ("print" if func.id == "print"
                else "warnings.warn" if func.id in warn_names else None)
    if isinstance(func, ast.Attribute):
        receiver = func.value
        recv_name = receiver.id if isinstance(receiver, ast.Name) else (
            receiver.attr if isinstance(receiver, ast.Attribute) else "")
        if isinstance(receiver, ast.Call) and _called(receiver) == "getLogger":
            recv_name = "getLogger"  # ``logging.getLogger(__name__).warning(...)``
        if recv_name == "warnings" and func.attr == "warn" or ast.unparse(func) in warn_names:
            return "warnings.warn"
        if func.attr in LOGGING_METHODS and recv_name and recv_name not in NOT_LOGGERS \
                and _logging_arguments(call, func.attr):
            return f"logger.{func.attr}"
    return None


def _called(call: ast.Call) -> str:
    """The name a call calls: ``f`` for ``f(...)`` and ``m.f(...)``."""
    func = call.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def _logging_arguments(call: ast.Call, method: str) -> bool:
    """Whether the call's arguments fit a logger's method: a message (``log``: a level and
    a message). ``x.log()`` (a tensor's logarithm) takes none."""
    given = len(call.args) + sum(1 for k in call.keywords if k.arg in ("msg", "level"))
    starred = any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords)
    return starred or given >= (2 if method == "log" else 1)


def side_effect_calls(stmt: ast.stmt | None,
                      warn_names: frozenset[str] = frozenset()) -> frozenset[str]:
    """Side-effecting calls in a statement's header (``side_effect_call``)."""
    if stmt is None:
        return frozenset()
    found = (side_effect_call(n, warn_names) for n in _header_nodes(stmt)
             if isinstance(n, ast.Call))
    return frozenset(f for f in found if f)
