"""Inductor compares a node's symbolic booleans before and after its post-grad passes by
structure, not by subtracting them, while stitch lowers.

Inductor's ``FakeTensorUpdater`` (``torch._inductor.fx_utils._is_fake_tensor_same``, torch
2.14.1) asks whether a node's new value equals its old one with ``Eq(new, old)``, and
canonicalising that subtracts one side from the other. For a ``SymBool`` (``Eq(u0, 1)``:
the ``.item()`` of a boolean a cond returns, the predicate of the next cond) the sides are
sympy relations, which cannot be subtracted, and every Inductor and AOTInductor build of
such a graph failed with ``TypeError: unsupported operand type(s) for -: 'Equality' and
'Equality'`` (AIMv2's and VITS's stitched graphs: the mask-skip decision feeds the next
cond). While ``symbool_by_structure()`` is active, two ``SymBool`` values are the same when
their expressions are the same expression; any other pair is compared by torch as before.
"The same" only lets the updater skip recomputing a value it already has; "not the same"
recomputes it, so the answer is never wrong in the unsafe direction. The patch is
re-entrant and undone when the last user leaves.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from .reentrant import Reentrant

_ORIGINAL: list = []  # torch's own comparison, found on first use (importing Inductor is slow)
_PATCH = Reentrant()


def _same(new, old, *args, **kwargs):
    if isinstance(new, torch.SymBool) and isinstance(old, torch.SymBool):
        return new.node.expr == old.node.expr
    return _ORIGINAL[0](new, old, *args, **kwargs)


@contextlib.contextmanager
def symbool_by_structure() -> Iterator[None]:
    from torch._inductor import fx_utils

    if not hasattr(fx_utils, "_is_fake_tensor_same"):  # torch 2.11 has no such comparison
        yield
        return
    if not _ORIGINAL:
        _ORIGINAL.append(fx_utils._is_fake_tensor_same)
    with _PATCH.active((fx_utils, "_is_fake_tensor_same", _same)):
        yield
