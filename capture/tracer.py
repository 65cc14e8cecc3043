"""Line-level tracing of the model's own Python, with ``sys.settrace``.

Two tracers:

* ``EagerTracer`` runs the model eagerly and records, for the functions that contain break
  sites, which way each condition went, and which module (path in the module tree) was
  running when a site's line executed.
* ``TimelineTracer`` runs the *compiled* model and records the user source lines that ran
  between fragments: Dynamo keeps line numbers in the code it rewrites, so the glue
  between graphs shows up as line events in the user's files.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field

from .source import parse_file, source_line


@dataclass(frozen=True)
class Condition:
    """An ``if``/``while``/``assert`` inside a function that contains a break site."""

    id: str
    kind: str  # "if" | "while" | "assert"
    filename: str
    lineno: int
    test_end: int
    body: tuple[int, int]  # first and last line of the body
    orelse: tuple[int, int] | None
    source_line: str
    data_dependent: bool

    @property
    def location(self) -> str:
        return f"{self.filename}:{self.lineno}"


@dataclass(frozen=True)
class Outcome:
    condition: str  # Condition.id
    taken: str  # "then" | "else" for if; "iterate" | "exit" for while; "pass" for assert


@dataclass
class EagerRecord:
    outcomes: list[Outcome] = field(default_factory=list)
    site_hits: list[tuple[str, str]] = field(default_factory=list)  # (site id, module path)


def conditions_in(filename: str, func_lines: Iterable[int], site_lines: set[int],
                  tainted_seed_lines: set[int]) -> list[Condition]:
    """Conditions in the functions that start at ``func_lines`` of ``filename``.

    ``data_dependent`` is a static, intra-function estimate: the condition sits on a break
    site, or its test reads a name assigned (directly or through other assignments) on a
    scalar-read site line, or the test itself reads a tensor into Python.
    """
    tree = parse_file(filename)
    if tree is None:
        return []
    wanted = set(func_lines)
    out: list[Condition] = []
    for func in ast.walk(tree):
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        first = min([func.lineno] + [d.lineno for d in func.decorator_list])
        if func.lineno not in wanted and first not in wanted:
            continue
        tainted = _tainted_names(func, tainted_seed_lines)
        for node in _own_statements(func):
            cond = _condition(node, filename, site_lines, tainted, len(out))
            if cond is not None:
                out.append(cond)
    return out


def _own_statements(func: ast.AST):
    """Statements of a function, not descending into nested functions or classes."""
    stack = list(reversed(getattr(func, "body", [])))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for name in ("body", "orelse", "finalbody", "handlers"):
            stack.extend(reversed(getattr(node, name, []) or []))


def _tainted_names(func: ast.AST, seed_lines: set[int]) -> set[str]:
    tainted: set[str] = set()
    assigns = [n for n in _own_statements(func) if isinstance(n, ast.Assign | ast.AnnAssign)]
    changed = True
    while changed:
        changed = False
        for node in assigns:
            value = node.value
            if value is None:
                continue
            reads = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
            if node.lineno in seed_lines or reads & tainted or _reads_scalar(value):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name) and n.id not in tainted:
                            tainted.add(n.id)
                            changed = True
    return tainted


def _reads_scalar(expr: ast.AST) -> bool:
    for n in ast.walk(expr):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in {
            "item", "tolist", "any", "all"
        }:
            return True
    return False


def _condition(node, filename, site_lines, tainted, index) -> Condition | None:
    if isinstance(node, ast.If | ast.While):
        kind = "if" if isinstance(node, ast.If) else "while"
        test = node.test
        body = (node.body[0].lineno, node.body[-1].end_lineno or node.body[-1].lineno)
        orelse = ((node.orelse[0].lineno, node.orelse[-1].end_lineno or node.orelse[-1].lineno)
                  if node.orelse else None)
    elif isinstance(node, ast.Assert):
        kind, test, body, orelse = "assert", node.test, (node.lineno, node.lineno), None
    else:
        return None
    reads = {n.id for n in ast.walk(test) if isinstance(n, ast.Name)}
    test_end = test.end_lineno or node.lineno
    dependent = (
        any(node.lineno <= ln <= test_end for ln in site_lines)
        or bool(reads & tainted)
        or _reads_scalar(test)
    )
    return Condition(
        id=f"C{index + 1}@{filename.rsplit('/', 1)[-1]}:{node.lineno}",
        kind=kind, filename=filename, lineno=node.lineno, test_end=test_end, body=body,
        orelse=orelse, source_line=source_line(filename, node.lineno), data_dependent=dependent,
    )


class EagerTracer:
    """Context manager: ``with EagerTracer(...) as rec: model(*args)``."""

    def __init__(self, conditions: list[Condition], site_lines: dict[tuple[str, int], str],
                 module_names: dict[int, str]) -> None:
        self.by_line = {(c.filename, c.lineno): c for c in conditions}
        self.site_lines = site_lines
        self.files = {c.filename for c in conditions} | {f for f, _ in site_lines}
        self.module_names = module_names
        self.record = EagerRecord()

    def __enter__(self) -> EagerRecord:
        self._previous = sys.gettrace()
        sys.settrace(self._global)
        return self.record

    def __exit__(self, *exc) -> None:
        sys.settrace(self._previous)

    def _global(self, frame, event, arg):
        if event != "call" or frame.f_code.co_filename not in self.files:
            return None
        pending: list[Condition] = []

        def local(frame, event, arg):
            if event == "line":
                filename, line = frame.f_code.co_filename, frame.f_lineno
                if pending:
                    cond = pending[0]
                    if not (cond.lineno <= line <= cond.test_end):
                        pending.clear()
                        self.record.outcomes.append(Outcome(cond.id, _taken(cond, line)))
                cond = self.by_line.get((filename, line))
                if cond is not None:
                    if cond.kind == "assert":
                        self.record.outcomes.append(Outcome(cond.id, "pass"))
                    else:
                        pending[:] = [cond]
                site = self.site_lines.get((filename, line))
                if site is not None:
                    self.record.site_hits.append((site, self._module_of(frame)))
            elif event == "return" and pending:
                cond = pending.pop()
                if cond.body[0] <= cond.test_end:  # one-line `if t: return x`
                    taken = "then"
                else:  # returning straight from the test: an exception, or a while's exit
                    taken = "exit" if cond.kind == "while" else "raised"
                self.record.outcomes.append(Outcome(cond.id, taken))
            return local

        return local

    def _module_of(self, frame) -> str:
        depth = 0
        while frame is not None and depth < 64:
            owner = frame.f_locals.get("self") if "self" in frame.f_code.co_varnames else None
            if owner is not None and id(owner) in self.module_names:
                return self.module_names[id(owner)]
            frame, depth = frame.f_back, depth + 1
        return ""


def _taken(cond: Condition, next_line: int) -> str:
    in_body = cond.body[0] <= next_line <= cond.body[1]
    if cond.kind == "while":
        return "iterate" if in_body else "exit"
    return "then" if in_body else "else"


class TimelineTracer:
    """Records user source lines in ``files`` into a shared event list during a compiled run."""

    def __init__(self, files: set[str], events: list) -> None:
        self.files = files
        self.events = events

    def __enter__(self):
        self._previous = sys.gettrace()
        sys.settrace(self._global)
        return self.events

    def __exit__(self, *exc) -> None:
        sys.settrace(self._previous)

    def _global(self, frame, event, arg):
        if frame.f_code.co_filename not in self.files:
            return None

        def local(frame, event, arg):
            if event == "line":
                self.events.append(("line", frame.f_code.co_filename, frame.f_lineno))
            return local

        return local
