"""Tests on an input's size that torch.export decided for the examples' sizes.

With a dimension exported dynamic, torch.export (non-strict) runs ``if x.shape[0] > 4:`` on
a symbolic size: Python needs a bool there, so it takes the side the examples take and
records a guard (``x.size()[0] > 4``). The program then raises ``Guard failed`` on the sizes
taking the other side, which the model accepts. Neither torch.compile (a guard, a recompile:
no break) nor torch.export (it succeeds) reports the line. Each guard keeps the frame that
made it (``ShapeGuard.sloc``); an ``if`` in user code there is a site of its own, which the
rewrite turns into a cond on the size::

    if x.shape[0] > 4:     # exported for sizes above 4 only; with the site: both sides

Only guards the program keeps on its inputs count (``ExportedProgram._guards_code``
non-empty): a test the dimension's range decides (``x.shape[0] != 1`` on ``[2, inf)``)
leaves no guard, and none is named here.
"""

from __future__ import annotations

import ast

import torch

from .sites import BreakKind, BreakSite, FoundBy, torch_assert
from .source import assert_aliases, is_user_file, qualname_at, source_line, statement_at

_DYNAMO_TRACER = "/_dynamo/symbolic_convert.py"  # where Dynamo runs the user's bytecode
SIZE_TEST_RULE = "export: a test on an input's size torch.export decided for the examples"
# the same test where the program tries its other arm at every size (stitch/size_rewrite.py)
ONE_ARM_RULE = "export: a test on an input's size, its other arm than example 0's tried for both"
SIZE_RULES = (SIZE_TEST_RULE, ONE_ARM_RULE)


def note_guard_lines(env, first: int, frame) -> None:
    """Keep, on ``env``, the innermost user line with each guard from index ``first`` on
    (Dynamo's user stack while it traces, else the frames from ``frame`` outwards): torch
    records the first frame outside torch, which is stitch's own where stitch wraps
    ``ShapeEnv.evaluate_expr`` (branch_asserts.py)."""
    where = None
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename.endswith(_DYNAMO_TRACER):  # the user's code is Dynamo's to say
            where = _dynamo_user_line()
            break
        if is_user_file(filename):
            where = (filename, frame.f_lineno, frame.f_code.co_name)
            break
        frame = frame.f_back
    if where is not None:
        env.__dict__.setdefault("_stitch_guard_lines", []).extend(
            (guard, *where) for guard in env.guards[first:])


def _dynamo_user_line() -> tuple[str, int, str] | None:
    """The innermost user frame of what Dynamo is tracing now."""
    try:
        from torch._guards import TracingContext

        stack = TracingContext.extract_stack()
    except Exception:  # noqa: BLE001 - no tracing context
        return None
    user = [f for f in stack or () if f.filename and is_user_file(f.filename)]
    return (user[-1].filename, user[-1].lineno or 0, user[-1].name) if user else None


def outer_envs(scope: dict) -> list:
    """The ShapeEnvs of the fake tensors a Dynamo frame's locals hold (the program being
    exported, around a cond's or loop's function that Dynamo traces on its own)."""
    import torch.utils._pytree as pytree

    envs: dict[int, object] = {}
    for value in pytree.tree_leaves(scope):
        env = getattr(getattr(value, "fake_mode", None), "shape_env", None)
        if env is not None:
            envs[id(env)] = env
    return list(envs.values())


def carry_guard_lines(output_graph, envs: list, counts: dict[int, int]) -> None:
    """Dynamo traces a cond's function with symbols of its own (``s4`` for the closure's
    ``x.shape[0]``), noting the user line of each guard there (``s4 >= 3`` at the inner
    ``if``); its check of those guards against the frame's inputs then puts them on the
    program's own symbols (``s77 >= 3``) from a frame that names no user line. Each such
    guard gets the line of the guard it came from: its tracked inputs' symbols replaced by
    the sizes the frame's inputs have."""
    import sympy

    lines = output_graph.shape_env.__dict__.get("_stitch_guard_lines", ())
    if not lines or not any(len(env.guards) > counts.get(id(env), 0) for env in envs):
        return
    scope = {"L": output_graph.local_scope}
    subst: dict = {}
    for tracked in getattr(output_graph, "tracked_fakes", ()):
        fake = getattr(tracked, "fake", None)
        if not isinstance(fake, torch.Tensor | torch.SymInt):
            continue
        try:
            value = eval(tracked.source.name, scope)  # noqa: S307 - Dynamo's source text
        except Exception:  # noqa: BLE001 - a source not read from the locals
            continue
        if isinstance(fake, torch.SymInt):  # a size the function reads (``n = x.shape[0]``)
            pairs = [(fake, value)] if isinstance(value, int | torch.SymInt) else []
        elif isinstance(value, torch.Tensor) and value.dim() == fake.dim():
            pairs = list(zip(fake.shape, value.shape, strict=True))
        else:
            continue
        for ours, theirs in pairs:
            if isinstance(ours, torch.SymInt) and isinstance(ours.node.expr, sympy.Symbol):
                subst[ours.node.expr] = theirs.node.expr if isinstance(
                    theirs, torch.SymInt) else sympy.Integer(theirs)
    traced = getattr(output_graph.shape_env, "replace", lambda e: e)
    for env in envs:
        same = getattr(env, "replace", lambda e: e)  # sizes known equal (x and y's rows)
        carried = [(_canonical(same(traced(inner.expr).xreplace(subst))), where)
                   for inner, *where in lines]
        for guard in env.guards[counts.get(id(env), 0):]:
            mine = _canonical(same(guard.expr))
            env.__dict__.setdefault("_stitch_guard_lines", []).extend(
                (guard, *where) for theirs, where in carried if theirs == mine)


def _canonical(expr):
    """A test on integer sizes in one form: ``s > 4``, ``4 < s`` and ``s >= 5`` alike (the
    check writes a guard in torch's form, not the trace's)."""
    import sympy

    if isinstance(expr, sympy.StrictGreaterThan | sympy.StrictLessThan |
                  sympy.GreaterThan | sympy.LessThan):
        big, small = (expr.lhs, expr.rhs) if isinstance(
            expr, sympy.StrictGreaterThan | sympy.GreaterThan) else (expr.rhs, expr.lhs)
        strict = isinstance(expr, sympy.StrictGreaterThan | sympy.StrictLessThan)
        return ">=", _reduced(sympy.expand(big - small - (1 if strict else 0)))
    if isinstance(expr, sympy.Eq | sympy.Ne):  # ``3*s == 9`` and ``s == 3`` alike
        diff = sympy.expand(expr.lhs - expr.rhs)
        factor = sympy.gcd_terms(diff).as_coeff_Mul()[0] if diff.free_symbols else 1
        diff = sympy.expand(diff / factor) if getattr(factor, "is_Integer", False) else diff
        return type(expr).__name__, frozenset((diff, sympy.expand(-diff)))
    return expr


def _reduced(diff):
    """``diff >= 0`` over integers with its terms' common factor divided out (``3*s - 9``
    and ``s - 3`` alike: torch writes ``x.numel() >= 9`` on 3 columns as ``s >= 3``)."""
    import math

    import sympy

    terms = dict(diff.as_coefficients_dict())
    constant = sympy.sympify(terms.pop(sympy.S.One, 0))
    if not terms or not all(getattr(c, "is_Integer", False)
                            for c in (*terms.values(), constant)):
        return diff
    factor = math.gcd(*(int(c) for c in terms.values()))
    if factor <= 1:
        return diff
    # g*e + c >= 0 over integers: e >= -c/g, so e + floor(c/g) >= 0
    return sympy.Add(*(int(c) // factor * t for t, c in terms.items()),
                     sympy.floor(sympy.Rational(int(constant), factor)))


def guard_lines(env) -> list[tuple]:
    """(guard, file, line, function) for each guard made in user code."""
    out = list(env.__dict__.get("_stitch_guard_lines", ()))
    for guard in env.guards:
        frame = getattr(guard.sloc, "framework_loc", None)
        filename = getattr(frame, "filename", None)
        if filename and getattr(frame, "lineno", None) and is_user_file(filename):
            out.append((guard, filename, frame.lineno, frame.name))
    return out


def guard_places(ep: torch.export.ExportedProgram) -> list[str]:
    """``file:line: source`` of each user line at which torch.export made one of the
    program's guards (in order, each once): where a "Guard failed" of the program comes
    from."""
    env = shape_env_of(ep)
    if env is None:
        return []
    places = (f"{filename}:{lineno}: {source_line(filename, lineno)}".rstrip(": ")
              for _guard, filename, lineno, _function in guard_lines(env))
    return list(dict.fromkeys(places))


def shape_env_of(ep: torch.export.ExportedProgram):
    """The ShapeEnv the program was traced with (its placeholders' fake mode), or None."""
    for node in ep.graph.find_nodes(op="placeholder"):
        fake = node.meta.get("val")
        mode = getattr(fake, "fake_mode", None)
        if mode is not None and getattr(mode, "shape_env", None) is not None:
            return mode.shape_env
    return None


def size_test_sites(ep: torch.export.ExportedProgram, known: set[str],
                    first_index: int) -> list[BreakSite]:
    """An ``if`` in user code at which each of the program's input-size guards was made (or a
    conditional expression assigned to a name, ``n = a if x.shape[1] % 8 else b``), a ``for
    ... in range(n)`` whose count the guard decided (``range(1 + int(x.shape[0] > 3))``), a
    ``while`` whose test it decided, an ``assert`` or a ``torch._assert`` call, by any name
    the module gives it (the program raises the model's AssertionError where the test
    fails, not a guard), or
    a statement calling ``int``, ``float`` or ``len`` (``h = int(x.shape[1] ** 0.5)``), not
    among ``known`` (file:line), as a site (ids ``Z<n>`` from ``first_index``)."""
    env = shape_env_of(ep)
    if env is None or not getattr(ep, "_guards_code", None):
        return []
    sites: list[BreakSite] = []
    seen = set(known)
    for guard, filename, lineno, function in guard_lines(env):
        statement = statement_at(filename, lineno)
        node = statement.node if statement else None
        # ``while x.shape[0] > 3 and k < 3:``: a loop too (bounded_while unrolls it)
        loop = (isinstance(node, ast.For) and _over_range(node)) or isinstance(node, ast.While)
        # ``n = a if x.shape[1] % 8 else b``: a branch too (an ``if`` statement first)
        branch = isinstance(node, ast.If) or (isinstance(node, ast.Assign)
                                              and isinstance(node.value, ast.IfExp))
        # ``h = int(x.shape[1] ** 0.5)``; ``padding = pad_b > 0 or pad_r > 0``: its truth
        # kept symbolic (``bool_values``), the ``if`` on it then a site of its own
        count = not branch and (_counts(node) or _truth_value(node))
        # ``assert x.shape[0] > 3 or ...``, ``torch._assert(...)`` by any name: a check
        check = isinstance(node, ast.Assert) or isinstance(node, ast.Expr) and torch_assert(
            node, assert_aliases(filename)) is not None
        if not (branch or loop or count or check) or f"{filename}:{node.lineno}" in seen:
            continue
        seen.add(f"{filename}:{node.lineno}")
        text = (f"torch.export decided this test on an input's size for the examples' sizes "
                f"(guard {guard.expr}): the program would raise 'Guard failed' on the sizes "
                "taking the other side")
        sites.append(BreakSite(
            id=f"Z{first_index + len(sites)}",
            kind=BreakKind.LOOP if loop else BreakKind.SCALAR_READ if count
            else BreakKind.ASSERT if check else BreakKind.BRANCH, rule=SIZE_TEST_RULE,
            gb_type="torch.export: guard on an input size", reason=text, filename=filename,
            lineno=node.lineno, source_line=source_line(filename, node.lineno),
            function=qualname_at(filename, node.lineno) or function,
            count=0, call_chain=(f"{filename}:{node.lineno}",), stopped_in="",
            data_dependent=False, found_by=FoundBy.EXPORT))
    return sites


def _over_range(node: ast.For) -> bool:
    it = node.iter
    return (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
            and len(it.args) == 1 and not it.keywords)


# builtins that must return a Python number: of a symbolic size, each fixes it
_NUMBER_BUILTINS = ("int", "float", "len")


def _truth_value(node: ast.AST | None) -> bool:
    """A statement whose value is ``and``/``or``/``not``/``any``/``all`` of tests
    (``padding = pad_b > 0 or pad_r > 0``, ``any(p > 0 for p in pads)``): Python asks
    ``bool()`` of each operand, which fixes a size it tests."""
    value = getattr(node, "value", None) if isinstance(
        node, ast.Assign | ast.AnnAssign | ast.Return) else None
    return value is not None and any(
        isinstance(n, ast.BoolOp) or (isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not))
        or (isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
            and n.func.id in ("any", "all"))
        for n in ast.walk(value))


def _counts(node: ast.AST | None) -> bool:
    """A statement whose value calls ``int``, ``float`` or ``len`` (a guard made there fixed
    a size the value follows: the rewrite keeps ``int``/``float`` of a symbolic number
    symbolic, ``rt_values.scalar``, and ``len`` of a tensor its symbolic size,
    ``len_to_size.py``; kornia's ``wf = float(max(w - 1, 1))``, torch_geometric's
    ``rev_perm[indices] = torch.arange(len(indices))``)."""
    value = getattr(node, "value", None) if isinstance(
        node, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.Expr | ast.Return) else None
    return value is not None and any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
        and n.func.id in _NUMBER_BUILTINS for n in ast.walk(value))


SIZES_READ = range(2, 65)  # the sizes a test on sizes is read at (stitch/verify/size_sides.GRID)


def traced_values(env) -> dict:
    """The sizes the trace's symbols had (torch 2.14: ``backed_var_to_val``; the older
    ``var_to_val`` warns there)."""
    values = env.__dict__.get("backed_var_to_val")
    return values if values is not None else env.__dict__.get("var_to_val", {})


def holds_at_most_sizes(expr, values: dict) -> bool | None:
    """Whether ``expr`` (a test on sizes, sympy over the trace's symbols) holds at more of
    the sizes read than it fails at: each of its symbols set in turn to 2..64 (or twice its
    traced value), the others at theirs. None where it does not reduce to a truth so (a
    symbol with no traced value) or on a tie."""
    import sympy

    symbols = list(getattr(expr, "free_symbols", ()))
    if not symbols or any(s not in values for s in symbols):
        return None
    here = {s: sympy.Integer(int(values[s])) for s in symbols}
    counts = {True: 0, False: 0}
    for symbol in symbols:
        for n in range(SIZES_READ.start, max(SIZES_READ.stop, 2 * int(values[symbol]) + 1)):
            try:
                truth = expr.xreplace({**here, symbol: sympy.Integer(n)})
            except ZeroDivisionError:  # a size the test divides by, 0 there: not a size
                continue
            except Exception:  # noqa: BLE001 - a guard sympy cannot evaluate so: unknown
                return None
            if truth not in (sympy.true, sympy.false):
                return None
            counts[truth is sympy.true] += 1
    return None if counts[True] == counts[False] else counts[True] > counts[False]


def special_side_lines(ep: torch.export.ExportedProgram) -> set[str]:
    """``file:line`` of each test whose guard holds at fewer of the sizes read than it
    fails at: the examples took the special side there (``padding_len > 0`` false, ``H ==
    window`` true), which one arm's general side is verified against."""
    env = shape_env_of(ep)
    if env is None:
        return set()
    values = traced_values(env)
    return {f"{filename}:{lineno}" for guard, filename, lineno, _ in guard_lines(env)
            if holds_at_most_sizes(guard.expr, values) is False}
