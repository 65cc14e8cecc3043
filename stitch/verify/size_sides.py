"""Which sizes a program accepts, and inputs of the sizes a size-test rewrite added.

A program torch.export made with a dynamic dimension accepts a size when it lies in the
dimension's range (``ep.range_constraints``) and passes the program's own guards
(``ExportedProgram._guards_code``, Python over the inputs' sizes). When stitch turns a
decided size test into a cond (capture/size_tests.py), the program it gets must accept every
size the first one did, and more: ``widening`` compares the two over a grid of sizes, one
group of tied dimensions at a time (the others at example 0's sizes). The sizes only the
new program accepts take the side no example took; ``side_probes`` cuts (or repeats)
example 0 to two of them, and verification compares the program with the model there.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, field

import sympy
import torch
import torch.utils._pytree as pytree
from torch.export.graph_signature import InputKind, TensorArgument
from torch.utils._sympy.numbers import int_oo

from capture.inputs import Example

# sizes tried per group of tied dimensions (0 and 1: size_probes): 2 to 64, and up to twice
# example 0's size there (an image of 64 pixels whose test on a 32-pixel stride turns at 65)
GRID = range(2, 65)
PROBES_PER_GROUP = 2


@dataclass(frozen=True)
class Widening:
    """Per group of tied dimensions (``x.shape[0] and y.shape[0]``): the grid sizes only
    the new program accepts."""

    added: dict[str, list[int]]
    where: dict[str, list[tuple[int, int]]]  # group -> (input leaf, dim)
    tried: dict[str, int]  # group -> the largest size tried
    refused: dict[str, list[int]] = field(default_factory=dict)  # neither accepts


def widening(before: torch.export.ExportedProgram, after: torch.export.ExportedProgram,
             model: torch.nn.Module, example: Example) -> Widening | str:
    """The sizes ``after`` accepts beyond ``before``, or why it is not a widening (a size
    ``before`` accepts that ``after`` refuses, no size added, or guards that cannot be read)."""
    # a dimension either program has dynamic (a guard ``== 6`` left the first one static)
    groups = _groups(before, example)
    later = _groups(after, example)
    if groups is not None and later is not None:
        # and each group of the new program's that is not one of the first's: a dimension
        # the first tied to another (a guard that they are equal) and the new one frees
        known = [set(dims) for dims in groups.values()]
        groups.update({k: v for k, v in later.items() if set(v) not in known})
    if groups is None:
        return "the program's inputs could not be matched with example 0"
    groups.update(_joint(groups, example, before))
    added: dict[str, list[int]] = {}
    where: dict[str, list[tuple[int, int]]] = {}
    refused: dict[str, list[int]] = {}
    sides = [_Sizes.of(ep, example) for ep in (before, after)]
    if None in sides:
        return "the program's inputs could not be matched with example 0"
    tried: dict[str, int] = {}
    leaves = _leaves(before, example)
    for label, dims in groups.items():
        actual = max(int(leaves[i].shape[d]) for i, d in dims)
        grid = range(GRID.start, max(GRID.stop, 2 * actual + 1))
        tried[label] = grid.stop - 1
        for n in grid:
            old, new = (side.accepts(model, example, dims, n) for side in sides)
            if old is None or new is None:
                return "the program's size guards could not be evaluated"
            if old and not new:
                return f"it refuses {label} == {n}, which the program before accepted"
            if new and not old:
                added.setdefault(label, []).append(n)
                where[label] = dims
            if not (old or new):
                refused.setdefault(label, []).append(n)
    if not added:
        return "it accepts no size the program before refused"
    return Widening(added, where, tried, refused)


@dataclass(frozen=True)
class _Sizes:
    """A program's sizes per input dimension, matched once with example 0's leaves."""

    ep: torch.export.ExportedProgram
    shapes: list  # example 0's leaves' shapes (None for a leaf that is not a tensor)
    dims: list  # input_dims(ep, example)

    @classmethod
    def of(cls, ep, example: Example) -> _Sizes | None:
        leaves, dims = _leaves(ep, example), input_dims(ep, example)
        if leaves is None or dims is None:
            return None
        return cls(ep, [list(leaf.shape) if isinstance(leaf, torch.Tensor) else None
                        for leaf in leaves], dims)

    def accepts(self, model: torch.nn.Module, example: Example,
                dims: list[tuple[int, int]], n: int) -> bool | None:
        """Whether the program accepts example 0 with each of ``dims`` set to ``n``: every
        dim in its range, every guard true. None where a guard cannot be evaluated."""
        shapes = [list(s) if s is not None else None for s in self.shapes]
        for i, d in dims:
            shapes[i][d] = n
        ranges = self.ep.range_constraints
        for i, d, size, _ in self.dims:
            if isinstance(size, int):
                if shapes[i][d] != size and (i, d) in dims:
                    return False
                continue
            expr = size.node.expr
            if isinstance(expr, sympy.Symbol) and expr in ranges:
                if shapes[i][d] not in _range(ranges[expr]):
                    return False
        return _guards_hold(self.ep, model, example, shapes)


def side_probes(widened: Widening, example: Example, ep: torch.export.ExportedProgram
                ) -> list[tuple[Example, str]]:
    """``example`` cut (or repeated) along each widened group to the nearest added sizes
    below and above its own: inputs taking the side no example took."""
    leaves, spec = flat_example(ep, example)
    out = []
    for label, sizes in widened.added.items():
        dims = widened.where[label]
        actual = leaves[dims[0][0]].shape[dims[0][1]]
        below = [n for n in sizes if n < actual]
        above = [n for n in sizes if n > actual]
        chosen = ([max(below)] if below else []) + ([min(above)] if above else [])
        for n in (chosen or sizes[:1])[:PROBES_PER_GROUP]:
            cut = list(leaves)
            for i, d in dims:
                cut[i] = _resized(cut[i], d, n)
            args, kwargs = pytree.tree_unflatten(cut, spec)
            out.append((Example(tuple(args), dict(kwargs)), f"{label} == {n}"))
    return out


def _resized(t: torch.Tensor, dim: int, n: int) -> torch.Tensor:
    """``t`` with ``n`` entries along ``dim``: its first ones, or itself repeated."""
    if n <= t.shape[dim]:
        return t.narrow(dim, 0, n).clone()
    times = -(-n // max(t.shape[dim], 1))
    return torch.cat([t] * times, dim=dim).narrow(dim, 0, n).clone()


def _range(vr) -> range:
    lower = int(vr.lower) if vr.lower.is_integer and vr.lower.is_number \
        and vr.lower not in (-int_oo, -sympy.oo) else 0
    upper = int(vr.upper) + 1 if vr.upper.is_integer and vr.upper.is_number \
        and vr.upper not in (int_oo, sympy.oo) else 1 << 62
    return range(lower, upper)


def flat_example(ep, example: Example):
    from torch.export._tree_utils import reorder_kwargs

    kwargs = reorder_kwargs(example.kwargs, ep.call_spec.in_spec)
    return pytree.tree_flatten((example.args, kwargs), is_leaf=lambda v: v is None)


def _leaves(ep, example: Example) -> list | None:
    try:
        return flat_example(ep, example)[0]
    except Exception:  # noqa: BLE001 - inputs torch matched otherwise
        return None


def input_dims(ep, example: Example) -> list[tuple[int, int, object, str]] | None:
    """(input leaf, dim, the program's size there: an int or a SymInt, the input's name) per
    dimension of each tensor the program takes as a user input; None where the program's
    inputs cannot be matched with the example's leaves."""
    leaves = _leaves(ep, example)
    users = [s for s in ep.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
    if leaves is None or len(users) != len(leaves):
        return None
    placeholders = {n.name: n for n in ep.graph.find_nodes(op="placeholder")}
    out = []
    for i, (user, leaf) in enumerate(zip(users, leaves, strict=True)):
        if not (isinstance(user.arg, TensorArgument) and isinstance(leaf, torch.Tensor)):
            continue
        node = placeholders.get(user.arg.name)
        fake = node.meta.get("val") if node is not None else None
        if isinstance(fake, torch.Tensor) and fake.dim() == leaf.dim():
            out += [(i, d, s, user.arg.name) for d, s in enumerate(fake.shape)]
    return out


def _joint(groups: dict[str, list[tuple[int, int]]], example: Example, ep
           ) -> dict[str, list[tuple[int, int]]]:
    """Groups of equal size at example 0, also probed together: a model may accept them
    only in step (a square image's height and width, tokens that must form a square
    grid), and one group moved alone then never shows the sizes a rewrite added."""
    leaves = _leaves(ep, example)
    by_size: dict[int, list[str]] = {}
    for label, dims in sorted(groups.items(), key=lambda item: item[1][0]):
        i, d = dims[0]
        by_size.setdefault(int(leaves[i].shape[d]), []).append(label)
    return {" and ".join(labels): [dim for label in labels for dim in groups[label]]
            for labels in by_size.values() if len(labels) > 1}


def _groups(ep, example: Example) -> dict[str, list[tuple[int, int]]] | None:
    """Dimensions exported dynamic, grouped by the symbol they share, named by them."""
    dims = input_dims(ep, example)
    if dims is None:
        return None
    by_symbol: dict = {}
    for i, d, size, name in dims:
        if isinstance(size, torch.SymInt) and isinstance(size.node.expr, sympy.Symbol):
            by_symbol.setdefault(size.node.expr, []).append((i, d, name))
    return {" and ".join(f"{name}.shape[{d}]" for _, d, name in group):
            [(i, d) for i, d, _ in group] for group in by_symbol.values()}


class _Sized:
    """What a guard reads of an input: its sizes."""

    def __init__(self, shape) -> None:
        self._shape = torch.Size(shape)

    def size(self, dim: int | None = None):
        return self._shape if dim is None else self._shape[dim]

    @property
    def shape(self):
        return self._shape


def _guards_hold(ep, model, example: Example, shapes: list) -> bool | None:
    guards = [g for g in getattr(ep, "_guards_code", ()) or () if isinstance(g, str)]
    if not guards:
        return True
    leaves, spec = flat_example(ep, example)
    sized = [_Sized(s) if s is not None else leaf for leaf, s in zip(leaves, shapes,
                                                                       strict=True)]
    args, kwargs = pytree.tree_unflatten(sized, spec)
    try:
        bound = inspect.signature(model.forward).bind(*args, **kwargs)
    except TypeError:
        return None
    # torch writes guards in Python with its own and math's functions (``torch.sym_max(1,
    # L['x'].size()[3] // 2)``, ``math.trunc(torch.sym_float(...))``): both in scope
    scope = {"L": dict(bound.arguments), "torch": torch, "math": math,
             "__builtins__": {"min": min, "max": max, "abs": abs, "int": int}}
    try:
        return all(bool(eval(g, scope)) for g in guards)  # noqa: S307 - torch's guard text
    except Exception:  # noqa: BLE001 - a guard over something else than sizes
        return None
