"""Dynamo's ``max``/``min`` of symbolic ints inside a cond's arm or a loop's body give the
right one while torch.export traces non-strictly.

Non-strict ``torch.export`` rebinds ``builtins.max`` and ``builtins.min`` to stand-ins that
take tensors (``torch._export.non_strict_utils._override_builtin_ops``). Dynamo, which traces
the arms of ``torch.cond`` and the bodies of ``torch.while_loop``, decides between
``torch.sym_max`` and ``torch.sym_min`` with ``self.fn is max``
(``torch/_dynamo/variables/builtin.py``, torch 2.14.1), where ``max`` is then the stand-in:
the test is false for ``max`` too, and ``max(a, b)`` of two symbolic ints becomes their
minimum, a wrong value with no error (``experiments/repro_max_in_hop.py``). The fix gives
that module names ``max`` and ``min`` of its own, bound to Python's builtins as they were
when stitch was imported. Everywhere but inside that export they are the objects the module
would find in ``builtins`` anyway, so the names are set once and left in place.
"""

from __future__ import annotations

import builtins
import contextlib
from collections.abc import Iterator

_BUILTINS = {"max": builtins.max, "min": builtins.min}  # before any export rebinds them


@contextlib.contextmanager
def dynamo_min_max_kept() -> Iterator[None]:
    from torch._dynamo.variables import builtin

    for name, function in _BUILTINS.items():
        if builtin.__dict__.get(name) is not function:
            setattr(builtin, name, function)
    yield
