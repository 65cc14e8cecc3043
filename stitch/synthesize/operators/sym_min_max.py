"""``min``/``max`` of symbolic floats while torch.export traces.

Non-strict torch.export replaces the builtins ``min`` and ``max`` while it traces
(``torch._export.non_strict_utils._override_builtin_ops``): two tensors become
``torch.minimum``/``maximum``, a tensor and a number a clamp, and two numbers of which one is
a ``SymInt`` ``torch.sym_min``/``sym_max``. Two floats of which one is a ``SymFloat``
(``min(float(h - 1), float(w - 1))`` of sizes: kornia's LAF normalisation) fall through to
Python's own ``min``, whose comparison torch.export decides for the traced sizes: the
program then raised ``Guard failed`` on every image whose sides are ordered the other way.

``min_max`` gives those (two or more, or a list of them: torch reduces a list pairwise
through this function) ``torch.sym_min``/``sym_max`` (the same number: neither operand is
NaN, a symbolic float is a size's arithmetic) and hands everything else, mixed int and
float included (Python's ``min`` returns the operand with its type), to torch's function.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch._export import non_strict_utils

_original = non_strict_utils._tensor_min_max


def _float(value: Any) -> bool:
    return type(value) is float or isinstance(value, torch.SymFloat)


def min_max(*args: Any, real_callable, tensor_callable, **kwargs: Any) -> Any:
    if len(args) >= 2 and not kwargs and all(map(_float, args)) \
            and any(isinstance(a, torch.SymFloat) for a in args):
        pick = torch.sym_max if tensor_callable is torch.maximum else torch.sym_min
        return functools.reduce(pick, args)  # ``min(a, b, c)`` too
    return _original(*args, real_callable=real_callable, tensor_callable=tensor_callable,
                     **kwargs)
