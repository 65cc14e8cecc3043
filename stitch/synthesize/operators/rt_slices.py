"""Sizes from data in rewritten code: slices whose bounds are tensors (``slice_bounds.py``:
loads and stores as Python's slicing makes them, the bounds read as symbolic ints while
exporting), ``len`` of such a tensor (``len_to_size.py``), a cond arm's test re-stated
in the arm (``arm_facts.py``), and ``contiguous()`` in an arm (``contiguous_copies.py``)."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch._dynamo.comptime import comptime

from capture.branch_asserts import state_arm_fact

from .rt_symbolic import SYMBOLIC, is_constant
from .site_marks import exporting_now


def index(value: Any) -> Any:
    """A slice bound: what Python's slicing takes from it. A one-element integer (or bool)
    tensor is read (``__index__`` in eager; an unbacked ``SymInt`` while exporting); any
    other value is returned as it is, for the slice to take or refuse as in eager."""
    if isinstance(value, torch.Tensor) and value.numel() == 1 \
            and not (value.is_floating_point() or value.is_complex()):
        return value.item()
    return value


def length(value: Any) -> Any:
    """``len(value)``; for a tensor with a dimension, its first size (what ``len`` gives in
    eager; symbolic while exporting, where ``len`` must make it a Python int)
    (``len_to_size.py``)."""
    if isinstance(value, torch.Tensor) and value.dim() > 0:
        return value.shape[0]
    return len(value)


def size_numel(value: Any) -> Any:
    """``value.numel()``; of a ``torch.Size``, the product of its sizes, symbolic while
    exporting (``torch.Size.numel`` makes each symbolic size a constant first: a guard
    fixing every dimension of the input, kornia's ``if input.shape.numel() == 0``)
    (``len_to_size.py``)."""
    if isinstance(value, torch.Size):
        return math.prod(value)
    return value.numel()


def contiguous(value: Any, *args: Any, **kwargs: Any) -> Any:
    """``value.contiguous(...)``. In a cond's arm while stitch exports (Dynamo traces it for
    torch.cond), a tensor's is a copy into the contiguous layout: Dynamo would decide
    whether a tensor of symbolic strides is contiguous already for the traced sizes, with a
    guard on them (the padded window cut ``x[:, :H, :W]`` is contiguous exactly where
    nothing was padded), and torch.cond refuses an arm whose output is a strided view. The
    values are the same; outside such an arm, the call as written (torch.export's own trace
    gets the same rule from capture/contiguity.py)."""
    if isinstance(value, torch.Tensor) and not args \
            and kwargs.get("memory_format", torch.contiguous_format) is torch.contiguous_format \
            and torch.compiler.is_dynamo_compiling() and exporting_now():
        return value.clone(memory_format=torch.contiguous_format)
    return value.contiguous(*args, **kwargs)


def as_int(value: Any) -> Any:
    """``int(value)``; a symbolic number (known only at run time while exporting) stays
    symbolic: ``torch.sym_int`` (``len_to_size.py``)."""
    if isinstance(value, torch.SymInt):
        return value
    if isinstance(value, torch.SymFloat):
        return torch.sym_int(value)
    return int(value)


def holds(test: Any, side: bool) -> None:
    """Inside a cond arm: its branch test came out ``side`` (``arm_facts.py``). A symbolic
    test is noted for deciding guards in this arm only (capture/branch_asserts.py); under
    Dynamo, which traces this function, the note is taken at trace time (``comptime``)."""
    # is_constant, not isinstance: under Dynamo a SymBool fails isinstance(.., SymBool)
    if isinstance(test, torch.Tensor) or is_constant(test):
        return
    if torch.compiler.is_dynamo_compiling():
        comptime(_state_traced)
        return
    state_arm_fact(test, side)


def _state_traced(ctx) -> None:
    try:
        tx = ctx._i_will_not_complain_if_bc_breaks_InstructionTranslator()
        test = getattr(tx.symbolic_locals["test"], "sym_num", None)
        side = tx.symbolic_locals["side"].as_python_constant()
    except Exception:  # noqa: BLE001 - another torch's Dynamo: nothing noted
        return
    state_arm_fact(test, side)


def store_slice(target: Any, key: Any, value: Any) -> None:
    """``target[key] = value``. Where ``key`` slices one dimension by bounds read from data,
    a ``slice_scatter`` written back with ``copy_`` (torch.export cannot take a view of a
    tensor that needs grad at data-dependent bounds: PendingUnbackedSymbolNotFound on torch
    2.14); same values, same aliases. A key of numbers and slices with such bounds
    otherwise (``mask[row, a:b, a:b] = True``) stores through the view it names (Dynamo
    takes no symbolic number as an index in a store). Anything else is stored as written."""
    parts = key if isinstance(key, tuple) else (key,)
    bounded = [i for i, p in enumerate(parts) if p != slice(None)]
    if not (isinstance(target, torch.Tensor) and isinstance(value, torch.Tensor)
            and all(isinstance(p, slice) for p in parts) and len(bounded) == 1
            and value.dim() == target.dim()):
        read = _read(key)
        if not (isinstance(target, torch.Tensor) and _store_view(target, read, value)):
            target[read] = value
        return
    dim = bounded[0]
    cut = parts[dim]
    start, stop, step = index(cut.start), index(cut.stop), index(cut.step)
    if not any(isinstance(b, SYMBOLIC) for b in (start, stop, step)) or \
            (step not in (None, 1)) or _static_one(value.shape[dim]):
        target[_read(key)] = value  # known bounds, or a broadcast along the cut: as written
        return
    src = value.to(target.dtype).expand(
        *[-1 if i == dim else target.shape[i] for i in range(target.dim())])
    target.copy_(target.slice_scatter(src, dim, start, stop))


def _store_view(target: torch.Tensor, key: Any, value: Any) -> bool:
    """``target[key] = value`` as the select/slice view Python's basic indexing names,
    written in place (the same elements, casts and broadcasting), for a key of numbers and
    slices; False (nothing stored) for any other key. (Under Dynamo a symbolic number is
    an ``int`` to ``isinstance``, so the key is not told apart by being symbolic.)"""
    parts = key if isinstance(key, tuple) else (key,)
    if len(parts) > target.dim() or not all(
            isinstance(p, (slice, int, torch.SymInt)) and not isinstance(p, bool)
            for p in parts):
        return False
    view, dim = target, 0
    for p in parts:
        if isinstance(p, slice):
            view = torch.ops.aten.slice.Tensor(view, dim, p.start, p.stop,
                                               1 if p.step is None else p.step)
            dim += 1
        else:
            view = view.select(dim, p)
    if isinstance(value, torch.Tensor):
        view.copy_(value)  # broadcasts and casts as a store does
    else:
        view.fill_(value)
    return True


def _static_one(size: Any) -> bool:
    return isinstance(size, int) and size == 1


def _read(key: Any) -> Any:
    def bound(b):
        return index(b) if isinstance(b, torch.Tensor) else b

    def part(p):
        if isinstance(p, slice):
            return slice(bound(p.start), bound(p.stop), bound(p.step))
        if isinstance(p, torch.Tensor) and p.dim() == 0 and p.dtype not in (torch.bool, torch.uint8) \
                and not (p.is_floating_point() or p.is_complex()):
            return p.item()  # Python indexes a 0-d integer tensor as a number (a select)
        return p

    return tuple(part(p) for p in key) if isinstance(key, tuple) else part(key)
