"""A Python list of numbers grown from tensors, made a tensor at the end (``number_list``):
the run-time side.

    cu = [0]                            cu = __stitch_rt__.numbers([0])
    cu.extend(t.tolist())          ->   cu = __stitch_rt__.numbers_extend(cu, t)
    cu.append(v)                        cu = __stitch_rt__.numbers_append(cu, v)
    cu[-1]                              __stitch_rt__.numbers_item(cu, -1)
    torch.tensor(cu, dtype=d)           __stitch_rt__.numbers_tensor(cu, dtype=d)

In eager each helper is the Python it replaced (the same list object, grown in place). While
torch.compile or torch.export traces, the list is a 1-D tensor from the start: ``t.tolist()``
of a tensor whose length is known only at run time has no Python length there
(transformers' ``get_vision_window_index``: the windows' cumulative sizes, per image of a
grid given as data), where ``torch.cat`` of it has. ``cu[-1]`` reads a 0-d copy; ``len(cu)``
is left as written (the first size).

Exact: integers are int64 as Python's ints are (within int64), floats float64; the final
``torch.tensor`` gives the dtype Python's list would have given (int64 for integers, the
default float dtype once a float is in) unless one is asked for.
"""

from __future__ import annotations

from typing import Any

import torch

from .rt_state import is_tracing

# the decision's reason; a round holding one takes its census with scalar reads captured
NUMBER_LIST = "of numbers grown by `.tolist()` of tensors kept a 1-D tensor while traced"


def numbers(values: list) -> Any:
    """The list as written in eager; a 1-D tensor of it while traced (on the CPU: it moves to
    the device of the first tensor it is extended by, as a list holds numbers anywhere)."""
    if not _traced():
        return values
    floats = any(isinstance(v, float) for v in values)
    return torch.tensor(values, dtype=torch.float64 if floats else torch.int64)


def numbers_extend(values: Any, tensor: Any) -> Any:
    """``values.extend(tensor.tolist())``; returns ``values``."""
    if isinstance(values, list):
        values.extend(tensor.tolist())
        return values
    return torch.cat([values.to(tensor.device), _as(tensor.reshape(-1), values)])


def numbers_append(values: Any, value: Any) -> Any:
    """``values.append(value)``; returns ``values``."""
    if isinstance(values, list):
        values.append(value)
        return values
    item = value if isinstance(value, torch.Tensor) else torch.tensor(value, device=values.device)
    return torch.cat([values.to(item.device), _as(item.reshape(1), values)])


def numbers_item(values: Any, index: int) -> Any:
    """``values[index]``; of the tensor, a copy (a view would let ``v += 1`` write into the
    list, where Python's number is immutable)."""
    if isinstance(values, list):
        return values[index]
    return values[index].clone()


def numbers_tensor(values: Any, *args: Any, **kwargs: Any) -> Any:
    """``torch.tensor(values, ...)``."""
    if isinstance(values, list):
        return torch.tensor(values, *args, **kwargs)
    dtype = kwargs.get("dtype")
    if dtype is None:
        dtype = torch.get_default_dtype() if values.is_floating_point() else torch.int64
    return values.to(dtype=dtype, device=kwargs.get("device") or values.device).clone()


def _as(tensor: Any, values: Any) -> Any:
    """``tensor`` in the list's number kind: integers stay int64, a float makes it float64
    (Python's list holds the float itself)."""
    floats = tensor.is_floating_point() or values.is_floating_point()
    return tensor.to(torch.float64 if floats else torch.int64)


def _traced() -> bool:
    return torch.compiler.is_compiling() or is_tracing()
