"""torch.export's advice on dynamic dimensions, not needed where every one is ``Dim.AUTO``.

After tracing, torch.export (non-strict, torch 2.14.1) makes the program's guards on its input
sizes (``ShapeEnv.produce_guards``) and then solves them (``DimConstraints.solve``, called by
``produce_guards_and_solve_constraints``) only to tell the user which of their dimensions
specialised and how to write simpler ones. That solver hands each size guard to sympy, whose
``reduce_inequalities`` raises ``NotImplementedError`` on some it cannot solve: ultralytics'
YOLOv9 concatenates a path through ``AConv`` (a 2x2 average pool of stride 1, then a stride-2
convolution) with one that is not, which guards ``Eq(x/4 - 2*((x/2)//4), 0)`` on the image
size, and torch.export failed with "The inequality ... cannot be solved using
solve_univariate_inequality" although the trace, and its guards, were complete.

Where every dynamic dimension of the export is ``Dim.AUTO`` (the dimensions stitch reads off
the examples), no answer of the solver changes the program: an AUTO dimension may specialise
without an error, and the guards are already made and kept in the program, which checks them on
every call. While ``dim_advice_optional(dynamic_shapes)`` is active with such shapes, the
solver's ``NotImplementedError`` ends its advice and the export goes on. With a dimension the
user named (``Dim("h")``, ``Dim.DYNAMIC``), or none dynamic, torch's behaviour is unchanged:
there the solver says which of the user's dimensions specialised.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from .reentrant import Reentrant

_PATCH = Reentrant()


def _solver():
    try:
        from torch.fx.experimental.symbolic_shapes import DimConstraints
    except ImportError:
        return None
    return DimConstraints if callable(getattr(DimConstraints, "solve", None)) else None


def only_auto(dynamic_shapes: Any) -> bool:
    """Whether ``dynamic_shapes`` marks some dimension dynamic, each with ``Dim.AUTO`` (the
    rest static: ``None``, an int, ``Dim.STATIC``)."""
    from torch.export import Dim

    found = []

    def walk(spec) -> bool:
        if isinstance(spec, dict):
            return all(walk(v) for v in spec.values())
        if isinstance(spec, list | tuple):
            return all(walk(v) for v in spec)
        if spec is Dim.AUTO:
            found.append(spec)
            return True
        return spec is None or spec is Dim.STATIC or isinstance(spec, int)

    return walk(dynamic_shapes) and bool(found)


_ORIGINAL: list = []  # torch's own solve, kept on first use


def _advice_or_none(self) -> None:
    try:
        _ORIGINAL[0](self)
    except NotImplementedError:  # sympy's: the advice stops here, the guards stand
        return


@contextlib.contextmanager
def dim_advice_optional(dynamic_shapes: Any) -> Iterator[None]:
    solver = _solver()
    if solver is None or not only_auto(dynamic_shapes):
        yield
        return
    if not _ORIGINAL:
        _ORIGINAL.append(solver.solve)
    with _PATCH.active((solver, "solve", _advice_or_none)):
        yield
