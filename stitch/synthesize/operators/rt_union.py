"""Values whose structure follows the data: a branch whose arms give one name a tensor of
another rank or dtype, or ``None`` on one side and a tensor on the other.

``torch.cond`` wants one output structure from both arms. Such an output is carried as a
flag (which arm ran) and both arms' leaves, each arm filling the other's with empty
placeholders of the same rank and dtype, and comes out of the branch as ``Alternatives``.
That is a registered pytree node: returned from the forward it is one more output structure
of the program (saved and loaded like any other), and ``resolve`` turns it back into the
value the model returned, after the graph (``stitch.running``). Used before that, inside
the traced code, it refuses with the branch's file:line: the rest of the computation would
have to follow both structures.

Which outputs need it is known from the arms' metadata: the eager runs of the rewritten
model note each side's (``note_side``), and a branch whose sides disagree (``known``) is
carried so from then on; under the census's ``torch.compile`` it runs as Python (a break
by design, ``python_branch``), as torch.cond cannot take it there. A branch whose sides were
not both seen, and that torch.cond refused while exporting, has both arms run once more on
fake tensors (``probe_arms``) and compared (``differing``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
import torch.utils._pytree as pytree

from ...errors import StitchError


class DataShapedValueError(StitchError):
    """A value whose structure depends on the data was used inside the program."""


class DataShapedAttributeError(DataShapedValueError, AttributeError):
    """A tensor's attribute asked of an ``Alternatives`` (an AttributeError too: ``hasattr``
    answers False)."""


class Alternatives(NamedTuple):
    """The value of one branch output: ``when_true`` where ``flag`` (a 0-d bool tensor) is
    true, else ``when_false``; the arm that did not run left empty placeholders. A named
    tuple, as Dynamo builds one inside a cond's arm (an arm nested in another); its tuple
    operations stay (pytree and Dynamo read it through them), the arithmetic and truth
    tests a tensor would take refuse."""

    flag: Any
    when_true: Any
    when_false: Any

    def _refuse(self, *_args, **_kwargs):
        where = "" if torch.compiler.is_dynamo_compiling() else f"{_source_line()}: "
        raise DataShapedValueError(
            f"{where}a value here has a different structure on each side of an earlier "
            "branch (a tensor of another rank or dtype, or None on one side only); stitch "
            "carries such a value to the program's outputs, where it is rebuilt after the "
            "graph, but here it is used inside the program, whose every step needs one "
            "structure. Give both sides one rank and dtype (reshape, or a zero tensor for "
            "None) before using it")

    __bool__ = __index__ = __float__ = __int__ = _refuse
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = _refuse
    __rtruediv__ = __matmul__ = __rmatmul__ = __neg__ = __lt__ = __le__ = __gt__ = _refuse
    __ge__ = __pow__ = __and__ = __or__ = _refuse

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        # a torch function given the carried value (``torch.isnan(h)``): a use, refused
        # as the tensor's own methods are
        cls._refuse(None)

    def __getattr__(self, attribute: str):
        # called only where no field or tuple method has the name: a tensor's method or
        # attribute (``.sum()``, ``.shape``) asked of the carried value. An AttributeError
        # too, so ``hasattr`` (code probing what a value is) answers False
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        try:
            self._refuse()
        except DataShapedValueError as e:
            raise DataShapedAttributeError(str(e)) from None


def _flatten(value: Alternatives):
    return list(value), None


def _unflatten(children, _context) -> Alternatives:
    return Alternatives(*children)


def _flatten_with_keys(value: Alternatives):
    return [(pytree.GetAttrKey(k), v) for k, v in zip(Alternatives._fields, value,
                                                       strict=True)], None


pytree.register_pytree_node(
    Alternatives, _flatten, _unflatten, serialized_type_name="stitch.Alternatives",
    flatten_with_keys_fn=_flatten_with_keys)


def resolve(value: Any) -> Any:
    """``value`` with every ``Alternatives`` replaced by the side its flag names."""
    def pick(v):
        if isinstance(v, Alternatives):
            return resolve(v.when_true if bool(v.flag) else v.when_false)
        return v

    return pytree.tree_map(pick, value, is_leaf=lambda v: isinstance(v, Alternatives))


def has_alternatives(value: Any) -> bool:
    return any(isinstance(v, Alternatives) for v in pytree.tree_leaves(
        value, is_leaf=lambda v: isinstance(v, Alternatives)))


# -- the branch ----------------------------------------------------------------------------

class _Leaf:
    """A tensor's shape, dtype and device, as an eager run gave it (``note_side``)."""

    __slots__ = ("device", "dtype", "shape")

    def __init__(self, t: torch.Tensor) -> None:
        self.shape, self.dtype, self.device = tuple(t.shape), t.dtype, t.device

    def dim(self) -> int:
        return len(self.shape)


def meta_of(value: Any):
    """What torch.cond needs the arms to agree on: the structure and each tensor's rank,
    dtype and device (sizes may differ: torch.cond makes them unbacked)."""
    leaves, spec = pytree.tree_flatten(value)
    return spec, tuple((leaf.dim(), leaf.dtype, leaf.device)
                       if isinstance(leaf, torch.Tensor | _Leaf)
                       else None if leaf is None else type(leaf) for leaf in leaves)


def differing(true_out: tuple, false_out: tuple) -> tuple[int, ...]:
    """The output positions whose arms disagree on structure, rank, dtype or device, where
    every leaf of both sides is a tensor or None (anything else is left to torch.cond's
    refusal)."""
    return _differing_metas(tuple(meta_of(v) for v in true_out),
                            tuple(meta_of(v) for v in false_out))


def probe_arms(true_fn: Callable, false_fn: Callable, operands: tuple,
               predicate: Any) -> dict[bool, tuple] | None:
    """Both arms run on the fake operands for their outputs' metadata, nothing traced into
    the graph; None where either fails to run so (the branch's own error then stands)."""
    from capture.branch_asserts import as_arm

    from .rt_state import RT
    from .rt_symbolic import untraced_probe

    RT.probing += 1
    try:
        with untraced_probe(operands):
            return {side: tuple(as_arm(fn, predicate, side, *operands))
                    for side, fn in ((True, true_fn), (False, false_fn))}
    except Exception:  # noqa: BLE001 - the probe only informs; the cond's error is reported
        return None
    finally:
        RT.probing -= 1


# branch key (rt_numbers._key / _site_key) -> side -> the distinct outputs eager runs of the
# rewritten model gave it, tensors as ``_Leaf`` (a branch in a loop may give a side another
# structure on another iteration: ``None`` on the first, a tensor later)
SIDES: dict[str, dict[bool, list[tuple]]] = {}
_DESCRIBED: list[tuple] = [()]  # the rewritten functions whose branches SIDES describes


def installing(functions: tuple) -> None:
    """SIDES describes the branches of one set of rewritten functions: a site's label is
    stable across rounds while its arms change (the next round's candidate puts the rest
    of a function in them), so another set starts the table afresh."""
    if len(functions) != len(_DESCRIBED[0]) or \
            any(a is not b for a, b in zip(functions, _DESCRIBED[0], strict=True)):
        SIDES.clear()
        _DESCRIBED[0] = tuple(functions)


def note_side(keys: tuple, taken: bool, out: tuple) -> None:
    shapes = pytree.tree_map_only(torch.Tensor, _Leaf, tuple(out))
    meta = tuple(meta_of(v) for v in shapes)
    for key in keys:
        if key is not None:
            seen = SIDES.setdefault(key, {}).setdefault(bool(taken), [])
            if all(tuple(meta_of(v) for v in other) != meta for other in seen):
                seen.append(shapes)


def known(keys: tuple) -> tuple[dict[bool, tuple], tuple[int, ...]] | None:
    """(a pair of outputs, one per side, as eager runs gave them, tensors as ``_Leaf``; the
    positions they disagree at) where eager runs saw the two sides of the branch give a
    structure each that the other did not."""
    for key in keys:
        sides = SIDES.get(key)
        if sides is None or len(sides) != 2:
            continue
        for t in sides[True]:
            for f in sides[False]:
                positions = differing(t, f)
                if positions:
                    return {True: t, False: f}, positions
    return None


@torch._dynamo.assume_constant_result
def known_now(*keys: str | None) -> bool:
    """``known`` as a constant to Dynamo (no guard on the table)."""
    return known(keys) is not None


def _differing_metas(t: tuple, f: tuple) -> tuple[int, ...]:
    if len(t) != len(f):
        return ()
    out = []
    for i, (a, b) in enumerate(zip(t, f, strict=True)):
        if a == b:
            continue
        if not all(m is None or isinstance(m, tuple) for m in (*a[1], *b[1])):
            return ()  # a number, a string: left to torch.cond's refusal
        out.append(i)
    return tuple(out)


def python_branch(predicate: Any, true_fn: Callable, false_fn: Callable,
                  operands: tuple) -> tuple:
    """The taken arm as Python: under the census's torch.compile, a break by design
    (``rt_effects.RUNS_IN_PYTHON``); the export carries the branch as ``Alternatives``."""
    return tuple((true_fn if bool(predicate) else false_fn)(*operands))


def _filler(value: Any) -> tuple:
    """(structure, (shape, dtype, device) per leaf) of the placeholders standing for
    ``value`` (an output, or an eager run's ``_Leaf`` of it) in the arm that does not give
    it. Its shape where that is known before the cond (plain sizes, sizes of the inputs, an
    eager run's): torch.cond merges equal shapes as they are, where sizes that differ
    become unbacked, which its stride merge may not decide. Else empty, of its rank."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    leaves, spec = pytree.tree_flatten(value)
    return spec, tuple(None if t is None else (
        t.shape if isinstance(t, _Leaf) else (0,) * t.dim()
        if free_unbacked_symbols(tuple(t.shape)) else tuple(t.shape), t.dtype, t.device)
        for t in leaves)


def _placeholders(filler: tuple) -> Any:
    spec, leaves = filler
    return pytree.tree_unflatten([None if m is None else torch.zeros(m[0], dtype=m[1],
                                                                     device=m[2])
                                  for m in leaves], spec)


def fillers_of(probed: dict, positions: tuple[int, ...]) -> dict:
    """What ``union_arms`` fills each side's missing outputs with (computed outside Dynamo:
    an arm nested in another is traced by it)."""
    return {side: {i: _filler(probed[side][i]) for i in positions} for side in probed}


def union_arms(site: str, true_fn: Callable, false_fn: Callable, probed: dict,
               positions: tuple[int, ...], logged: bool = False,
               fillers: dict | None = None) -> tuple[Callable, Callable]:
    """The arms with each output at ``positions`` given as (flag, true side, false side), the
    side that did not run as placeholders, ready for ``rebuild``. ``probed``: each side's
    outputs (a probe's, or an eager run's: ``known``). ``logged``: the arms return ``(outputs, log)``
    (a branch with side effects, rt_effects.py). ``fillers``: ``fillers_of``, made earlier."""
    fillers = fillers or fillers_of(probed, positions)

    def arm(fn, side):
        other = fillers[not side]

        def run(*operands):
            out = fn(*operands)
            if logged:
                out, log = out
            out = tuple(out)
            flat = []
            for i, value in enumerate(out):
                if i not in positions:
                    flat.append(value)
                    continue
                if meta_of(value) != meta_of(probed[side][i]):
                    raise DataShapedValueError(
                        f"{site}: a side of this branch gave an output another structure "
                        "when traced than when it was run for its metadata")
                filler = _placeholders(other[i])
                flag = torch.full((), side, dtype=torch.bool, device=_device(value, filler))
                flat.append((flag, value, filler) if side else (flag, filler, value))
            return (tuple(flat), log) if logged else tuple(flat)

        run.__name__ = getattr(fn, "__name__", "arm")
        return run

    return arm(true_fn, True), arm(false_fn, False)


def layout_numbers(probed: dict, positions: tuple[int, ...]) -> frozenset[int]:
    """The leaves of the union arms' outputs that are Python numbers (never at
    ``positions``, which hold tensors only)."""
    out, i = set(), 0
    for p, value in enumerate(probed[True]):
        spec, leaves = meta_of(value)
        if p in positions:
            i += 1 + len(leaves) + len(meta_of(probed[False][p])[1])
            continue
        for leaf in leaves:
            if leaf in (bool, int, float, torch.SymBool, torch.SymInt, torch.SymFloat):
                out.add(i)
            i += 1
    return frozenset(out)


def probed_union(site: str, predicate: torch.Tensor, true_fn: Callable, false_fn: Callable,
                 operands: tuple, positions: tuple[int, ...]) -> tuple:
    """A branch of different structures inside an arm being probed (fake tensors): both
    sides run, each output at ``positions`` the ``Alternatives`` the trace will give."""
    t, f = tuple(true_fn(*operands)), tuple(false_fn(*operands))
    flag = torch.ones((), dtype=torch.bool, device=predicate.device)
    return tuple(Alternatives(flag, t[i], f[i]) if i in positions else v
                 for i, v in enumerate(t))


_STITCH = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_OWN = tuple(d + os.sep for d in (os.path.dirname(torch.__file__), _STITCH,
                                  os.path.join(os.path.dirname(_STITCH), "capture")))


def _source_line() -> str:
    """file:line of the innermost frame outside torch and stitch (the model's code, which
    rewritten functions keep the file and lines of)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_OWN):
        frame = frame.f_back
    return "the branch" if frame is None else \
        f"{frame.f_code.co_filename}:{frame.f_lineno}"


def _device(*values) -> torch.device:
    for leaf in pytree.tree_leaves(values):
        if isinstance(leaf, torch.Tensor):
            return leaf.device
    return torch.device("cpu")
