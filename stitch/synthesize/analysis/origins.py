"""Which ``if`` (or conditional expression) of the model's own source a branch site is, so
that verification can force the model itself, not only stitch's rewrite.

Each round parses the function from its source; ``tag_tests`` marks every ``if`` and
``a if t else b`` with where it stands (file, kind, line, column). The passes rewrite a
test's reads faithfully (``.item()`` kept a tensor, ``not`` a logical not); an ``if``
stitch builds (a loop's guard, a mask loop's test) is a new node without the mark, and a
test stitch replaces with its own names (an early exit's flag) reads a ``__stitch_`` name.
When a branch becomes a ``torch.cond``, its site's label is noted with the mark
(``origin_of``: None for a branch stitch built). A branch whose value stitch also fixed
elsewhere (a continuation folding the same flag into later tests, ``continuation.py``) is
noted None too (``note_built``): forcing the model's one test would not force those. The
compiled rewrite carries the notes as data (``ORIGINS`` on the function).

``forced_source`` rebuilds the function from its source with chosen tests replaced by a
constant, the test still evaluated first (``[test, True][1]``: a test that prints or
advances an iterator does so as in the model): the model's own code taking a chosen side.
"""

from __future__ import annotations

import ast
import types

Origin = tuple[str, str, int, int, bool]  # (file, "if" | "ifexp", line, column, negated)

ORIGINS = "__stitch_origins__"  # attribute of a compiled rewrite: label -> {origin or None}
_MARK = "_stitch_origin"
_NEGATED = "_stitch_negated"
_FROM = "_stitch_from"  # an if made of a conditional expression: that expression's mark
_OURS = "__stitch_"  # names stitch introduces; ``__stitch_rt__`` calls keep a test's meaning


def _kind(node: ast.AST) -> str | None:
    return "if" if isinstance(node, ast.If) else "ifexp" if isinstance(node, ast.IfExp) \
        else None


def tag_tests(func: ast.FunctionDef, filename: str) -> ast.FunctionDef:
    """Mark every branch test of a freshly parsed function with its place."""
    for node in ast.walk(func):
        kind = _kind(node)
        if kind is not None:
            setattr(node, _MARK, (filename, kind, node.lineno, node.col_offset, False))
    return func


def origin_of(node: ast.If | ast.IfExp) -> Origin | None:
    """The model's test this branch still tests, or None: a test stitch built or changed
    in a way that reads its own names (a flag, a lifted read). A branch ``negated`` marked
    takes its true side exactly where that test is false."""
    if getattr(node, _NEGATED, None) is not None:
        return getattr(node, _NEGATED)
    mark = getattr(node, _FROM, None) or getattr(node, _MARK, None)
    if mark is None or (mark[1] != _kind(node) and getattr(node, _FROM, None) is None):
        return None
    if any(isinstance(n, ast.Name) and n.id.startswith(_OURS) and n.id != "__stitch_rt__"
           for n in ast.walk(node.test)):
        return None
    return mark


def tests_as(node: ast.If, source: ast.IfExp) -> None:
    """``node``, an ``if`` made of the conditional expression ``source``
    (``ifexp_statements``), tests what it tests: forcing it forces that expression."""
    mark = getattr(source, _MARK, None)
    if mark is not None:
        setattr(node, _FROM, mark)


def note(origins: dict[str, set], label: str, node: ast.If | ast.IfExp) -> None:
    origins.setdefault(label, set()).add(origin_of(node))


def negated(node: ast.If, origin: Origin) -> None:
    """``node`` (a branch stitch built) takes its true side exactly where the model's test
    at ``origin`` is false, on every run (``break_guard``: an iteration runs on where no
    earlier test broke)."""
    setattr(node, _NEGATED, (*origin[:4], not origin[4]))


def note_built(origins: dict[str, set], label: str) -> None:
    """The branch at ``label`` is not forced by its one test of the model alone."""
    origins.setdefault(label, set()).add(None)


def source_origins(rewrites: dict, labels) -> dict[str, tuple] | None:
    """For each label: (key of the function, origin) of the model's test it forces; None
    when any label is not one test of the model's source (a branch stitch built). A test
    copied into another function (a caller's continuation) is the one test it came from,
    forced where it is written."""
    found: dict[str, tuple] = {}
    for label in labels:
        origins = {o for _, fn in rewrites.values() for o in getattr(fn, ORIGINS, {}).get(
            label, ())}
        if len(origins) != 1 or None in origins:
            return None
        (origin,) = origins
        keys = [key for key, (target, _) in rewrites.items() if _holds(target, origin)]
        if len(keys) != 1:
            return None
        found[label] = (keys[0], origin)
    return found


def _holds(target, origin: Origin) -> bool:
    """Whether the target function's code (nested functions included) spans the line."""
    def lines(code):
        yield from (ln for _, _, ln in code.co_lines() if ln is not None)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                yield from lines(const)

    code = target.base.__code__
    return target.filename == origin[0] and code.co_firstlineno <= origin[2] <= max(
        lines(code), default=0)


def forced_source(func: ast.FunctionDef, filename: str,
                  sides: dict[tuple, bool]) -> ast.FunctionDef | None:
    """``func`` (parsed from source) with the tests at ``sides`` replaced by their side,
    each evaluated first; None unless every one is found exactly once."""
    hits = dict.fromkeys(sides, 0)
    for node in ast.walk(func):
        kind = _kind(node)
        where = (filename, kind, getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
        if kind is None or where not in sides:
            continue
        hits[where] += 1
        pair = ast.List([node.test, ast.Constant(sides[where])], ast.Load())
        node.test = ast.copy_location(ast.Subscript(pair, ast.Constant(1), ast.Load()),
                                      node.test)
    if any(n != 1 for n in hits.values()):
        return None
    return ast.fix_missing_locations(func)


def model_forced(rewrites: dict, force: dict[str, bool], parse, compile_) -> dict | None:
    """Replacements (as ``functions.installed`` takes them) that make the model's own
    functions take the sides in ``force`` (label -> side), all else as written; None when
    some label has no one test of the model behind it (the caller then checks against the
    rewrite only)."""
    places = source_origins(rewrites, force)
    if places is None:
        return None
    per_key: dict = {}
    for label, (key, origin) in places.items():
        sides, side = per_key.setdefault(key, {}), force[label] != origin[4]
        if sides.setdefault(origin[:4], side) != side:
            return None  # one test under two labels, forced both ways
    out = {}
    for key, sides in per_key.items():
        target = rewrites[key][0]
        func = forced_source(parse(target), target.filename, sides)
        if func is None:
            return None
        new: types.FunctionType = compile_(target, func)
        out[key] = (target, new)
    return out
