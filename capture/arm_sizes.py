"""A cond output whose arms give it sizes that the arms' own conditions make the same number
keeps that number, not a new size from data.

torch.cond (``_merge_output``, torch 2.14.1) gives an output dimension a new unbacked size
wherever its two arms write the size as different expressions. An arm is taken only under
its condition, and under it the two are often the same number::

    if H != 240 or W != 240:                     # the false arm runs only where H == W == 240
        x = F.interpolate(x, size=(240, 240))    # true arm: 240;  false arm: H, which is 240

A new size from data there stops everything after the cond that uses the size (an assert
that the image is 240 wide, a layer sized for it): torch cannot decide a test on it, and the
program was held to the examples' image size. While ``arm_sizes_merged()`` is active, where
every size and stride of one arm's output equals the other's under the condition that arm
runs under (and those of the arms around it), and each size that differs is a number in the
arm kept, the output takes the kept arm's sizes and strides: the sizes it has at run time on
either side, proven, not assumed. The proof reads the condition's conjuncts: ``Eq(e, c)``
replaces ``e`` by ``c``, ``e <= 0`` (or ``e < 1``) of an ``e`` never negative replaces it by
0; the sizes are then the same expression, or equal by the ranges the condition puts on
single symbols (``arm_ranges``). Anything else is torch's merge, a new size: where the kept
size would be an expression of the inputs' sizes (a padded window's ``h + pad`` and its cut
``h``), later ops (a reshape's view algorithm, Dynamo's trace of the next cond) guard on it
at the examples' values, while a size from data takes torch's size-oblivious path.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

import sympy
import torch

from .arm_ranges import decided_in_arm
from .branch_asserts import arm_conditions, available, own_conditions, symbolic_predicate
from .reentrant import Reentrant

_PATCH = Reentrant()
_ORIGINAL: list = []  # torch's own merge, found on first use


def _expr(value) -> sympy.Basic:
    return value.node.expr if isinstance(value, torch.SymInt) else sympy.Integer(value)


def _conjuncts(condition: sympy.Basic) -> list[sympy.Basic]:
    condition = sympy.to_nnf(condition, simplify=False)
    return list(condition.args) if isinstance(condition, sympy.And) else [condition]


def _replacements(env, conditions: list[sympy.Basic]) -> dict:
    """What the conditions fix: an expression equal to a number, or one never negative that
    is at most 0 (is 0)."""
    out: dict = {}
    for condition in conditions:
        for atom in _conjuncts(condition):
            if not isinstance(atom, sympy.Rel):
                continue
            if atom.lhs.is_number and not atom.rhs.is_number:
                atom = atom.reversed
            lhs, rhs = atom.lhs, atom.rhs
            if not rhs.is_number or lhs.is_number:
                continue
            if isinstance(atom, sympy.Eq):
                out[lhs] = rhs
            elif (
                isinstance(atom, sympy.LessThan)
                and rhs == 0
                or isinstance(atom, sympy.StrictLessThan)
                and rhs == 1
            ) and _never_negative(env, lhs):
                out[lhs] = sympy.Integer(0)
    return out


def _never_negative(env, expr: sympy.Basic) -> bool:
    try:
        return bool(env.bound_sympy(expr).lower >= 0)
    except Exception:  # noqa: BLE001 - an expression torch cannot bound: not known
        return False


def equal_under(env, lhs, rhs, conditions: list[sympy.Basic]) -> bool:
    """Whether the sizes ``lhs`` and ``rhs`` are equal wherever ``conditions`` all hold."""
    a, b = _expr(lhs), _expr(rhs)
    if a == b:
        return True
    fixed = _replacements(env, conditions)
    if fixed:
        a, b = a.xreplace(fixed), b.xreplace(fixed)
        if a == b or sympy.expand(a - b) == 0:
            return True
    return decided_in_arm(env, sympy.Eq(a, b), conditions) == sympy.true


def _layout(t: torch.Tensor) -> tuple:
    return (*t.size(), *t.stride())


def _numbers_where_they_differ(kept: torch.Tensor, other: torch.Tensor) -> bool:
    """Each size of ``kept`` that is written otherwise in ``other`` is a number. Only a number
    is kept: an expression of sizes (``h``, ``h + pad``) lets later ops (a reshape's view
    algorithm, Dynamo's trace of the next cond) guard on it at the examples' values, where a
    size from data takes torch's size-oblivious path; a number is static for everything
    after."""
    return all(_expr(k).is_number for k, o in zip(kept.size(), other.size(), strict=True)
               if _expr(k) != _expr(o))


def _kept(env, a: torch.Tensor, b: torch.Tensor, truth, around: list):
    """The arm output (``a`` the true arm's) whose layout the other has wherever it runs,
    its differing sizes numbers; None where neither is proven."""
    for kept, other, runs in ((a, b, sympy.Not(truth)), (b, a, truth)):
        if _numbers_where_they_differ(kept, other) and all(
                equal_under(env, k, o, [runs, *around])
                for k, o in zip(_layout(kept), _layout(other), strict=True)):
            return kept
    return None


def _merged(a, b, mode):
    original = _ORIGINAL[0]
    frame = sys._getframe(1)
    env = getattr(mode, "shape_env", None)
    if (
        env is None
        or not isinstance(a, torch.Tensor)
        or not isinstance(b, torch.Tensor)
        or a.dim() != b.dim()
        or a.dtype != b.dtype
        or a.device != b.device
        or all(_expr(x) == _expr(y) for x, y in zip(_layout(a), _layout(b), strict=True))
        or frame.f_code.co_name != "cond_fake_tensor_mode"
    ):
        return original(a, b, mode)
    truth = symbolic_predicate(frame.f_locals.get("pred"), frame)
    if not own_conditions(env, [truth]):  # data, or symbols of another ShapeEnv
        return original(a, b, mode)
    around = own_conditions(env, arm_conditions(frame.f_back))
    try:
        kept = _kept(env, a, b, truth, around)
    except Exception:  # noqa: BLE001 - a size sympy cannot compare: torch merges it
        kept = None
    if kept is None:
        return original(a, b, mode)
    with mode:
        return torch.empty_strided(kept.size(), kept.stride(), dtype=a.dtype, device=a.device)


@contextlib.contextmanager
def arm_sizes_merged() -> Iterator[None]:
    """Merge cond outputs as above while the body runs (re-entrant); a no-op where this
    torch's cond has no ``_merge_output`` or its tracers another shape."""
    import torch._higher_order_ops.cond  # noqa: F401 - the module (its name is also a function)

    cond_module = sys.modules["torch._higher_order_ops.cond"]
    if not available() or not hasattr(cond_module, "_merge_output"):
        yield
        return
    if not _ORIGINAL:
        _ORIGINAL.append(cond_module._merge_output)
    with _PATCH.active((cond_module, "_merge_output", _merged)):
        yield
