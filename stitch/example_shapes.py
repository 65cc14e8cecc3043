"""Dynamic dimensions read off the examples.

Examples whose tensors differ in a dimension (a batch of 2 and one of 3) say the program
must take both. torch.export, given no ``dynamic_shapes``, makes every dimension static, so
the program raised "Guard failed: x.size()[0] == 2" on the second example and stitch refused
it. Where the user passes no ``dynamic_shapes``, each dimension that differs among the
examples is exported as ``Dim.AUTO`` (dynamic unless the model needs it static: then
verification on the example that differs says so); dimensions that agree stay static, as
torch.export would make them. Examples whose structures differ give no spec.

torch.export fixes a dynamic dimension traced at size 0 or 1 as a constant ("0/1
specialized"), so a first example of batch 1 would give a program for batch 1 only. The
program is traced from the example with the fewest such sizes in its dynamic dimensions
(``traced_first``); every example, the batch-1 one included, is still verified. Where such
an example then fails a guard, the export runs again reasoning about sizes obliviously
(stitch/pipeline.py, ``small_sizes``): a trace at batch 2 can leave guards torch made to
tell a size from 1 inside its own ops (a reshape's view, a broadcast), which the batch-1
example fails although the model computes alike there.
"""

from __future__ import annotations

import inspect
from dataclasses import replace

import torch
import torch.utils._pytree as pytree
from torch.export import Dim

from capture.inputs import Example


def _bound(model: torch.nn.Module, ex: Example) -> dict | None:
    try:
        return dict(inspect.signature(model.forward).bind(*ex.args, **ex.kwargs).arguments)
    except (TypeError, ValueError):
        return None


def _differing(tensors: list) -> dict[int, object] | None:
    """``{dim: Dim.AUTO}`` for the dims whose sizes differ among ``tensors`` (one leaf of
    every example); None when they agree or are not all tensors of one rank."""
    if not all(isinstance(t, torch.Tensor) for t in tensors) \
            or len({t.dim() for t in tensors}) != 1:
        return None
    dims = {d: Dim.AUTO for d in range(tensors[0].dim())
            if len({t.shape[d] for t in tensors}) > 1}
    return dims or None


def shapes_from_examples(model: torch.nn.Module, inputs: list[Example]) -> dict | None:
    """``dynamic_shapes`` by forward's argument names, each dimension that differs among the
    examples marked ``Dim.AUTO``; None when none differs or the examples cannot be lined up
    (other argument names, other structures)."""
    if len(inputs) < 2:
        return None
    bound = [_bound(model, ex) for ex in inputs]
    if any(b is None or list(b) != list(bound[0]) for b in bound):
        return None
    spec: dict = {}
    found = False
    for name in bound[0]:
        flat = [pytree.tree_flatten(b[name]) for b in bound]
        if any(tree != flat[0][1] or len(leaves) != len(flat[0][0]) for leaves, tree in flat):
            return None
        leaves = [_differing([f[0][i] for f in flat]) for i in range(len(flat[0][0]))]
        found = found or any(leaves)
        kind = inspect.signature(model.forward).parameters[name].kind
        if kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            if any(leaves):
                return None  # *args / **kwargs: torch.export wants them spelled out
            spec[name] = None
            continue
        spec[name] = pytree.tree_unflatten(leaves, flat[0][1]) if leaves else None
    return spec if found else None


def _is_leaf_spec(spec) -> bool:
    """A ``dynamic_shapes`` entry for one tensor: ``{0: Dim...}`` or a per-dimension
    tuple/list with None for static."""
    return (isinstance(spec, dict) and all(isinstance(k, int) for k in spec)) or (
        isinstance(spec, tuple | list) and not any(isinstance(v, dict | tuple | list)
                                                   for v in spec))


def _dynamic_dims(leaf_spec) -> list[int]:
    """The dimensions a one-tensor ``dynamic_shapes`` entry marks dynamic."""
    if not _is_leaf_spec(leaf_spec):
        return []
    items = leaf_spec.items() if isinstance(leaf_spec, dict) else enumerate(leaf_spec)
    return [d for d, v in items if v is not None]


def _small_sizes(model: torch.nn.Module, ex: Example, spec: dict) -> int | None:
    """How many dynamic dimensions of ``spec`` the example has at size 0 or 1 (torch.export
    makes those constant), or None where the example and the spec do not line up."""
    bound = _bound(model, ex)
    if bound is None:
        return None
    count = 0
    for name, value_spec in spec.items():
        if value_spec is None or name not in bound:
            continue
        if _is_leaf_spec(value_spec):
            pairs = [(bound[name], value_spec)]
        else:
            leaves, tree = pytree.tree_flatten(bound[name])
            try:
                specs = tree.flatten_up_to(value_spec)
            except (ValueError, TypeError):
                return None
            pairs = list(zip(leaves, specs, strict=True))
        for value, leaf_spec in pairs:
            if not isinstance(value, torch.Tensor):
                continue
            count += sum(1 for d in _dynamic_dims(leaf_spec)
                         if d < value.dim() and value.shape[d] <= 1)
    return count


def small_sizes(model: torch.nn.Module, inputs: list[Example], spec: dict | None
                ) -> set[str]:
    """The names (``Example.name``, as verification names them) of the examples with size 0
    or 1 in a dimension ``spec`` marks dynamic."""
    if not spec or not isinstance(spec, dict) or len(inputs) < 2:
        return set()
    return {ex.name(i) for i, ex in enumerate(inputs) if _small_sizes(model, ex, spec)}


def traced_first(model: torch.nn.Module, inputs: list[Example],
                 spec: dict | None) -> tuple[list[Example], int]:
    """``inputs`` with the example torch.export should trace first: the first one with the
    fewest dynamic dimensions of size 0 or 1 (the first example where it has none). Returns
    the reordered list and the index of the traced example in the given order."""
    if not spec or not isinstance(spec, dict) or len(inputs) < 2:
        return inputs, 0
    counts = [_small_sizes(model, ex, spec) for ex in inputs]
    if counts[0] is None or counts[0] == 0 or any(c is None for c in counts):
        return inputs, 0
    best = min(range(len(inputs)), key=lambda i: (counts[i], i))
    if counts[best] == counts[0]:
        return inputs, 0
    numbered = [replace(ex, number=i) for i, ex in enumerate(inputs)]
    return [numbered[best], *numbered[:best], *numbered[best + 1:]], best


def describe(spec: dict | None) -> str:
    """``x: dims 0, 1; mask: dim 0`` for a report note."""
    if not spec:
        return ""
    parts = []
    for name, value in spec.items():
        dims = sorted({d for leaf in pytree.tree_leaves(value, is_leaf=lambda v: isinstance(
            v, dict) and all(isinstance(k, int) for k in v)) if isinstance(leaf, dict)
            for d in leaf})
        if dims:
            parts.append(f"{name}: dim{'s' if len(dims) > 1 else ''} "
                         + ", ".join(map(str, dims)))
    return "; ".join(parts)
