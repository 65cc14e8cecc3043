"""Split by sizes from data, map, concatenate (``split_map``): the run-time side.

    torch.cat([f(q, k) for q, k in zip(q.split(n.tolist(), 2), k.split(n.tolist(), 2))], 1)
    ->  __stitch_rt__.split_map_cat(lambda q, k: f(q, k), (q, k), n, 2, 1, "file:line")

In eager (and wherever the sizes are Python numbers) it is that Python: split, map in
order, concatenate. While torch.compile or torch.export traces it, the number of segments
is a size known only at run time (``n.tolist()`` has no length there): one
``torch.while_loop`` over the segments, in order, each segment's result written into the
concatenated output at its place (``index_copy``). The output has the segments' total size
along the concatenated dimension: ``f`` must give a segment of ``m`` rows ``m`` rows there
(a ``torch._check`` in the graph says so when it does not). Measured on torch 2.14.1:

- a while_loop body holds numbers read from its operands (``.item()`` of ``index_select``)
  and ops sized by them, under Dynamo and non-strict torch.export;
- ``narrow`` by such numbers gives a size torch cannot compare (``Max(0, u1 + u2 -
  Min(64, u1))``), where ``index_select`` by ``arange(m) + start`` gives ``m`` itself;
- a Python test on a segment's size (``q.shape[2] > 1``, transformers' sdpa wrapper) cannot
  be decided for a size from data: each step is a ``torch.cond`` between a segment of one
  row (a static size) and one of ``m >= 2`` rows (``torch._check``'d inside that arm), so
  torch decides such tests there as Python would;
- a segment of no rows gives no rows: the one-row arm runs on a row it then throws away.

The output's other dimensions come from ``f`` on each tensor's first row (a static shape:
the graph keeps no part of that call). An input with no rows at all raises in the program
where ``torch.cat`` of no segments gives an empty tensor in eager (named in the check).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .rt_state import is_tracing
from .rt_symbolic import is_unbacked
from .rt_values import fresh
from .rt_while_loop import carried_while_loop

# the decision's reason; a round holding one takes its census with scalar reads captured
SEGMENTS = "split by sizes from data, mapped and concatenated"


def split_map_cat(fn: Callable, tensors: tuple, sizes: Any, split_dim: int, cat_dim: int,
                  site: str = "") -> Any:
    """``torch.cat([fn(*parts) for parts in zip(*(torch.split(t, sizes.tolist(),
    split_dim) for t in tensors))], cat_dim)``; one while_loop while traced."""
    if not _traced(sizes):
        splits = [torch.split(t, _sizes(sizes), dim=split_dim) for t in tensors]
        return torch.cat([fn(*parts) for parts in zip(*splits, strict=False)],
                         dim=cat_dim)

    first = tensors[0]
    split_dim %= first.dim()
    total = first.shape[split_dim]
    # messages made first: Dynamo traces a message closure only when every variable it
    # holds is a Python constant, which a size known only at run time is not
    empty, bad, not_kept = _empty(site), _bad_sizes(site), _not_kept(site)
    torch._check(total >= 1, lambda: empty)
    sizes = sizes.reshape(-1).to(torch.int64)
    # what torch.split checks in eager: no size below 0, and they sum to every tensor's length
    torch._check(sizes.clamp(max=0).sum().item() == 0, lambda: bad)
    torch._check(sizes.sum().item() == total, lambda: bad)
    for t in tensors[1:]:
        torch._check(t.shape[split_dim % t.dim()] == total, lambda: bad)
    # its shape only; a copy: a map writing in place must not write the input's first row
    probe = fn(*(t.narrow(split_dim, 0, 1).clone() for t in tensors))
    cat_dim %= probe.dim()
    _no_rows_for_none(fn, tensors, split_dim, cat_dim, site)
    shape = list(probe.shape)
    shape[cat_dim] = total
    out = probe.new_zeros(shape)
    starts = torch.cumsum(sizes, 0) - sizes
    reads = tuple(t.clone() for t in tensors)  # operands, not views of one another

    def rows(t: Any, start: Any, count: Any) -> Any:
        return t.index_select(split_dim, torch.arange(count, device=t.device) + start)

    def put(out: Any, value: Any, start: Any, count: Any) -> Any:
        torch._check(value.shape[cat_dim] == count, lambda: not_kept)
        return out.index_copy(cat_dim, torch.arange(count, device=out.device) + start, value)

    def one(i, out, starts, sizes, *reads):  # a segment of 0 or 1 row
        start = _read(starts, i).clamp(max=total - 1).item()
        torch._check(start >= 0)
        torch._check(start < total)
        value = fn(*(rows(t, start, 1) for t in reads))
        at = torch.arange(1, device=out.device) + start
        keep = out.index_select(cat_dim, at)
        value = torch.where(_read(sizes, i) == 1, value, keep)
        return (put(out, value, start, 1),)

    def many(i, out, starts, sizes, *reads):  # m >= 2 rows
        start, count = _read(starts, i).item(), _read(sizes, i).item()
        torch._check(start >= 0)
        torch._check(count >= 2)
        return (put(out, fn(*(rows(t, start, count) for t in reads)), start, count),)

    def cond_fn(i, out, starts, sizes, *reads):
        return i < sizes.shape[0]

    def step(i, out, starts, sizes, *reads):
        operands = (i, out, starts, sizes, *reads)
        (new,) = torch.cond(_read(sizes, i) <= 1, one, many, operands)
        for d in range(new.dim()):
            torch._check(new.shape[d] == out.shape[d])
        return fresh((i + 1, new, starts, sizes, *reads), operands)

    counter = torch.zeros((), dtype=torch.int64, device=sizes.device)
    result = carried_while_loop(cond_fn, step, (counter, out, starts, sizes, *reads))
    return result[1].clone()


def _no_rows_for_none(fn: Callable, tensors: tuple, split_dim: int, cat_dim: int,
                      site: str) -> None:
    """The loop writes nothing for a segment of no rows; a map that gives rows for one (``if
    p.shape[0] == 0: return torch.full((1, d), 7.)``) would lose them, so it is refused
    while the program is made. The map is run on an empty segment of each tensor (its
    shape only, on the fake tensors with nothing recorded): where it raises, eager raises
    on such a segment too. Not under Dynamo (the census), which cannot trace a call that
    may raise; the program itself is made without it."""
    if torch.compiler.is_dynamo_compiling():
        return
    from torch._guards import detect_fake_mode
    from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing

    mode = detect_fake_mode(tensors)
    env = getattr(mode, "shape_env", None)
    pending = list(env.pending_fresh_unbacked_symbols) if env is not None else None
    try:
        # on the fake tensors alone: nothing of it is recorded in the program (a map that
        # cannot take an empty segment would otherwise raise there on every call)
        with disable_proxy_modes_tracing():
            empty = fn(*(t.narrow(split_dim, 0, 0).clone() for t in tensors))
    except Exception:  # noqa: BLE001 - the map cannot take an empty segment, in eager too
        return
    finally:  # sizes the probe read are not the program's
        if env is not None:
            env.pending_fresh_unbacked_symbols[:] = pending
    rows = empty.shape[cat_dim] if isinstance(empty, torch.Tensor) and \
        empty.dim() > cat_dim else 0
    if isinstance(rows, int) and rows != 0:
        raise RuntimeError(
            f"{site}: the map gives {rows} row(s) along the concatenated dimension for a "
            "segment of none (expected none, as a segment of m rows gives m): the program's "
            "loop writes nothing for an empty segment and would lose them; keep the loop in "
            "Python or give no rows for an empty segment")


def _traced(sizes: Any) -> bool:
    if not isinstance(sizes, torch.Tensor):
        return False
    return torch.compiler.is_compiling() or is_tracing() or is_unbacked(sizes.shape[0])


def _sizes(sizes: Any) -> Any:
    return sizes.tolist() if isinstance(sizes, torch.Tensor) else sizes


def _read(values: Any, i: Any) -> Any:
    return values.index_select(0, i.reshape(1).to(values.device)).squeeze(0)


def _empty(site: str) -> str:
    return (f"{site}: the tensors split by sizes from data have no rows (found 0, expected "
            "at least 1): the program's loop over the segments needs one; in eager "
            "torch.cat of the empty segments gives an empty tensor")


def _bad_sizes(site: str) -> str:
    return (f"{site}: split sizes that do not cover the rows exactly, or one below 0 "
            "(expected sizes >= 0 summing to the length of every tensor split, as "
            "torch.split requires in eager)")


def _not_kept(site: str) -> str:
    return (f"{site}: a segment's result has another number of rows along the "
            "concatenated dimension than the segment (expected the same): the program "
            "writes each result at its segment's place; keep the loop in Python")
