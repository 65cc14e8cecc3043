"""Sizes known only at run time, read by a cond's or loop's functions through their closure.

torch.cond and torch.while_loop, called while torch.export traces without Dynamo (stitch's
default, ``strict=False``), compile their functions with Dynamo on their own. A function
that reads an unbacked size through its closure (a count from ``nonzero``, bound before a
continuation as ``def __stitch_rest_N(v, per=per)``: torchvision's ``boxes_per_image``)
then stops torch 2.14 twice:

1. Dynamo lifts an unbacked ``SymInt`` into the graph it traces only inside torch's flag for
   tracing that is not strict (``torch.compiler._non_strict_tracing_context``), which
   torch.export 2.14 does not set: "Attempted to wrap unbacked SymInt".
2. With the flag set, a size a nested function reads whose symbol the subgraph already
   bound lazily (from a tensor input's shape) is handed on as the unrealised ``LazyProxy``
   (``SubgraphTracer.lift_tracked_freevar_to_input``), which fx cannot put in a call:
   "Dynamo could not create a proxy for an argument in the call to Tensor.split()".

``lifting_unbacked()`` sets the flag and realises such a proxy the way torch itself does
where it looks symbols up (``lookup_unbound_symbols``), while stitch's cond or loop is
traced, and only then. Under Dynamo (torch.compile, strict export) it does nothing: there the
functions are traced by the Dynamo pass already running. A torch without these names turns
the workaround off (``available()``), and the export then stops with torch's own message.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch


def _tracer_class():
    try:
        from torch._dynamo.output_graph import LazyProxy, SubgraphTracer
    except ImportError:
        return None, None
    if not callable(getattr(SubgraphTracer, "lift_tracked_freevar_to_input", None)):
        return None, None
    return SubgraphTracer, LazyProxy


def available() -> bool:
    """Whether this torch has the flag and the tracer method the workaround uses."""
    return callable(getattr(torch.compiler, "_non_strict_tracing_context", None)) and \
        _tracer_class()[0] is not None


def _realised(original):
    _, lazy_proxy = _tracer_class()

    def lift(self, proxy):
        out = original(self, proxy)
        if isinstance(out, lazy_proxy):
            out = out()
            value = proxy.node.meta.get("example_value")
            if isinstance(value, torch.SymInt) and \
                    isinstance(self.bound_symbols.get(value.node.expr), lazy_proxy):
                self.bound_symbols[value.node.expr] = out
        return out

    lift.__wrapped__ = original
    return lift


@contextlib.contextmanager
def _lifting() -> Iterator[None]:
    tracer, _ = _tracer_class()
    original = tracer.lift_tracked_freevar_to_input
    nested = hasattr(original, "__wrapped__")  # a cond inside one being traced
    if not nested:
        tracer.lift_tracked_freevar_to_input = _realised(original)
    try:
        with torch.compiler._non_strict_tracing_context():
            yield
    finally:
        if not nested:
            tracer.lift_tracked_freevar_to_input = original


def lifting_unbacked():
    """While torch.cond or torch.while_loop traces stitch's functions outside Dynamo."""
    if torch.compiler.is_dynamo_compiling() or not available():
        return contextlib.nullcontext()
    return _lifting()


def lifted(call: Callable[[], Any]) -> Any:
    """``call()`` (a torch.cond or torch.while_loop over stitch's functions), traced first
    as torch.export traces it: Dynamo then checks the guards its trace of the functions made
    against the inputs, so a size test decided there (``if x.shape[0] >= 3:`` read through
    the closure, a dimension exported dynamic) reaches the program's checks. Inside
    ``lifting_unbacked()`` Dynamo skips that check (torch's flag for tracing that is not
    strict), and such a test was decided for the examples' sizes with no check left: a
    silent, different result on the other sizes. The workaround is taken only where the
    first trace fails (an unbacked size read through the closure), as before; there the
    limit stays (named in docs/guarantees.md)."""
    if torch.compiler.is_dynamo_compiling() or not available():
        return call()
    try:
        return call()
    except Exception:  # noqa: BLE001 - traced again with the workaround; its error stands
        pass
    with _lifting():
        return call()
