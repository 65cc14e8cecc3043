"""Inputs of the sizes a dynamic dimension's range leaves out, made from example 0.

torch.export gives a dimension exported dynamic (``Dim.AUTO``, or one the examples differ
in) the range ``[2, inf)``: it assumes the size is neither 0 nor 1, and decides a model's
``if x.shape[0] == 1:`` for the other side. The program's own input check (torch 2.14.1)
lets 0 and 1 through, and the program then computes what the model computes for larger
sizes: a silent, different result. A trace can narrow the range further (``if
x.shape[0] > 2:``), and the program then raises on sizes the model accepts.

Here each example is narrowed along each such dimension (every input dimension of that size
together: ``input_ids`` and ``attention_mask`` alike) to each size below its range that
it can be cut to: 0, 1, and up to the range's lower bound (0 and 1 also where the range
holds them: an export that reasons about sizes obliviously, stitch/pipeline.py, traces no
test of them). The pipeline runs the model on
each; where the model accepts the input, verification compares the program with it as with
any example: a program that returns a different result there is refused; one that raises
there (torch's own guard, which says so) is kept, and the report notes the sizes it
refuses.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from dataclasses import dataclass, replace

import sympy
import torch
import torch.utils._pytree as pytree

from capture import torch_messages as tm
from capture.inputs import Example

from ..errors import VerificationError
from .hints import WHY
from .size_sides import flat_example, input_dims, side_probes

MAX_PER_DIMENSION = 3  # sizes tried below each range: 0, 1, and one more where narrowed

# set while the user's own dynamic_shapes are exported: their Dims say which sizes the
# program serves (a Dim's min cannot be read back from the program), so nothing is probed
USER_SHAPES: contextvars.ContextVar[bool] = contextvars.ContextVar("user_shapes",
                                                                   default=False)


@dataclass(frozen=True)
class SizeProbe:
    example: Example
    what: str  # "x.shape[0] == 1"


def size_probes(ep: torch.export.ExportedProgram, example: Example) -> list[SizeProbe]:
    """``example`` cut to each size below each dynamic dimension's range."""
    dims = input_dims(ep, example)
    if dims is None:  # inputs torch matched otherwise: nothing to probe
        return []
    leaves, spec = flat_example(ep, example)
    where: dict[sympy.Symbol, list[tuple[int, int, str]]] = {}
    tangled: set = set()  # symbols a size depends on otherwise than as itself (2*s, s + t)
    for i, d, size, name in dims:
        if not isinstance(size, torch.SymInt):
            continue
        expr = size.node.expr
        if isinstance(expr, sympy.Symbol):
            where.setdefault(expr, []).append((i, d, f"{name}.shape[{d}]"))
        else:
            tangled |= expr.free_symbols
    probes = []
    for symbol, group in where.items():
        if symbol in tangled or symbol not in ep.range_constraints:
            continue
        lower = ep.range_constraints[symbol].lower
        lower = int(lower) if lower.is_finite else 0
        actual = min(leaves[i].shape[d] for i, d, _ in group)
        for size in sorted({0, 1, *range(2, lower)})[:MAX_PER_DIMENSION]:
            if size >= max(lower, 2) or size >= actual:  # 0 and 1: probed even in range
                continue
            cut = list(leaves)
            for i, d, _ in group:
                cut[i] = cut[i].narrow(d, 0, size).clone()
            args, kwargs = pytree.tree_unflatten(cut, spec)
            probes.append(SizeProbe(Example(tuple(args), dict(kwargs)),
                                    f"{' and '.join(sorted({n for _, _, n in group}))} "
                                    f"== {size}"))
    return probes


def size_checks(ep: torch.export.ExportedProgram,
                examples: list[Example], restore_state: Callable[[], None],
                verified: Callable[..., list], widened=None,
                forced: list = ()) -> tuple[list, list[str]]:
    """Verify the program on each probe the model accepts, cut from every example (an arm
    only one example enters holds a size test only its cuts reach), and with each side of
    each branch forced on it (``forced``, forced.every_side_runs: a cut's data may take
    neither side, and a size test in an arm is reached only so)
    (``verified``: the pipeline's verification over a list of examples): a different result
    is refused, naming the size; a program that raises there (torch's own guard: it says
    so) is kept, and the report notes the sizes it refuses. Whether the model accepts a
    probe is its verification's own run of the model (``skip_refused``). ``widened``: the sizes a
    size-test rewrite added (size_sides.Widening), probed too. Returns the checks and those
    notes."""
    if USER_SHAPES.get():
        return [], []
    checks, notes = [], size_guards(ep)
    probes = []
    for k, example in enumerate(examples):
        sides = [SizeProbe(ex, what) for ex, what in side_probes(widened, example, ep)] \
            if widened is not None else []
        probes += [(k, probe) for probe in (*sides, *size_probes(ep, example))]
    for k, probe in probes:
        what = f"example {k} cut to {probe.what}"
        try:  # a size the model refuses itself owes nothing: no check, no program run
            found = verified([probe.example], skip_refused=True)
        except VerificationError as e:
            if e.raised is None:
                raise _differs(what, str(e).split(": ", 1)[-1]) from None
            note = (f"inputs with {probe.what} (which the model accepts) are refused by "
                    f"the program: it raises there ({_first_line(e.raised)}); torch.export "
                    "left them out of the dimension's range or guards")
            notes += [note] if note not in notes else []
            continue
        finally:
            restore_state()
        if not found:
            continue
        checks += [replace(c, what=what) for c in found]
        if forced:
            checks += _forced_on(what, probe.example, verified, forced,
                                 _sizes_of(ep, probe.example))
    return checks, notes


def _forced_on(what: str, example: Example, verified: Callable[..., list],
               forced: list, sizes: dict) -> list:
    """The forced sides run on a probe: a different result is refused; a program that
    raises there, or a forced site that is itself a test of sizes (forced on a probe
    either way, one of its sides meets sizes its arm was traced not to take), says nothing
    either way; nor is a side run whose sizes the probe's contradict (``forced.size_needs``:
    ``while x.shape[0] > 3 and k < 3:`` forced true on 3 rows)."""
    checks = []
    for run in forced:
        if any(_false_at(need, sizes) for need in getattr(run[3], "size_needs", ())):
            continue
        try:
            found = verified([], [run], example)
        except VerificationError as e:
            if e.raised is not None or e.size_test:
                continue
            raise _differs(what, str(e), forced=True) from None
        checks += [replace(c, what=f"{what}, {c.what}") for c in found]
    return checks


def _sizes_of(ep: torch.export.ExportedProgram, example: Example) -> dict:
    """The example's size at each dimension the program holds as one symbol."""
    dims = input_dims(ep, example)
    if dims is None:
        return {}
    leaves, _ = flat_example(ep, example)
    return {size.node.expr: leaves[i].shape[d] for i, d, size, _ in dims
            if isinstance(size, torch.SymInt) and isinstance(size.node.expr, sympy.Symbol)}


def _false_at(condition: sympy.Basic, sizes: dict) -> bool:
    """Whether ``condition`` is false at ``sizes`` (every symbol in it given)."""
    if not condition.free_symbols or not condition.free_symbols <= sizes.keys():
        return False
    try:
        value = condition.xreplace({s: sympy.Integer(v) for s, v in sizes.items()})
    except Exception:  # noqa: BLE001 - an expression sympy cannot evaluate so: no claim
        return False
    return value is sympy.false


def _differs(what: str, text: str, forced: bool = False) -> VerificationError:
    text = text.split(WHY, 1)[0]  # the why below is the one that applies here
    where = (f"on {what} with a branch forced (a side the cut's own data does not take: "
             "stitch cannot tell whether an input of this size takes it), the program "
             "differs from the model forced alike" if forced else
             f"on {what}, an input the model accepts, the program differs")
    return VerificationError(
        f"{where}: {text}\n"
        "Why: that dimension was exported dynamic, and torch.export treats its sizes "
        "below the exported range (0 and 1 always) as if they were larger (a test "
        "such as `if x.shape[0] == 1` is decided for the larger side), and its "
        "program returns that side's result without a check. What you can do: give "
        "examples of one size along that dimension (the program is then exported for "
        "that size), pass dynamic_shapes yourself (the program serves the sizes "
        "torch.export gives it then; torch 2.14 does not check 0 and 1), or make the "
        "model compute alike for it.")


def size_guards(ep: torch.export.ExportedProgram) -> list[str]:
    """The program's own checks on its inputs' sizes beyond each range's lower end (torch
    2.14 keeps them as ``ExportedProgram._guards_code``; ``ep.module()`` runs them): a
    Python test on a size that torch.export decided for the examples (``if x.shape[0] >
    4:``, ``% 2 == 0``, two sizes equal) leaves a program that raises ``Guard failed`` on
    the sizes taking its other side, which the model accepts. Each is a note in the
    report: nothing is rewritten for them yet."""
    guards = [tm.GUARD_SOURCE.pattern.sub(r"\1", g) for g in getattr(ep, "_guards_code", ())
              or () if isinstance(g, str)]
    if not guards:
        return []
    return ["SIZE GUARDS: the program accepts only inputs where " + " and ".join(
        f"`{g}`" for g in guards) + " (a test on an input's size that torch.export decided "
        "for the examples' sizes; on other sizes, which the model may accept, the program "
        "raises 'Guard failed'). What you can do: export one program per side (each from "
        "examples on that side), or write the test as torch.cond on the size "
        "(torch.cond(x.shape[0] > 4, ...)) so the graph holds both sides."]


def _first_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}".split("\n", 1)[0][:160]


def with_guard_places(error: VerificationError, places: list[str]) -> VerificationError:
    """``error`` naming the user lines at which torch.export made the program's guards,
    where the program failed one (torch's own message names none)."""
    raised = error.raised
    if not places or not (isinstance(raised, AssertionError)
                          and tm.matches(tm.GUARD_FAILED, str(raised))):
        return error
    lines = "".join(f"\n  {p}" for p in places[:8])
    more = f"\n  (and {len(places) - 8} more)" if len(places) > 8 else ""
    return VerificationError(f"{error}\ntorch.export made the program's input guards at:"
                             f"{lines}{more}", raised=raised, size_test=error.size_test)
