"""Sizes known only at run time, read by a cond's or loop's functions through their closure.

torch.cond and torch.while_loop, called while torch.export traces without Dynamo (stitch's
default, ``strict=False``), compile their functions with Dynamo on their own. A function
that reads an unbacked size through its closure (a count from ``nonzero``, bound before a
continuation as ``def __stitch_rest_N(v, per=per)``: torchvision's ``boxes_per_image``)
then meets three things in torch 2.14:

1. Dynamo lifts an unbacked ``SymInt`` into the graph it traces only inside torch's flag for
   tracing that is not strict (``torch.compiler._non_strict_tracing_context``), which
   torch.export 2.14 does not set: "Attempted to wrap unbacked SymInt".
2. With the flag set, a size a nested function reads whose symbol the subgraph already
   bound lazily (from a tensor input's shape) is handed on as the unrealised ``LazyProxy``
   (``SubgraphTracer.lift_tracked_freevar_to_input``), which fx cannot put in a call:
   "Dynamo could not create a proxy for an argument in the call to Tensor.split()".
3. With the flag set, Dynamo skips checking the guards its trace made against the frame's
   inputs ("Guard failed on the same frame" check in ``CheckFunctionManager``). That check
   is what ties a size test the function decided (``if x.shape[0] >= 6:``, on a fresh
   symbol of Dynamo's trace) to the input's own symbol; without it the test is decided
   for the examples' sizes with no guard left in the program (silent).

``_lifting()`` sets the flag, realises such a proxy the way torch itself does
where it looks symbols up (``lookup_unbound_symbols``) and runs Dynamo's guard check with
the flag cleared, while stitch's cond or loop is traced, and only then. Every cond and loop
is traced so (once, unless its operands alias and it is traced again on copies). Under
Dynamo (torch.compile, strict export) it does nothing: there the functions are traced by
the Dynamo pass already running. A torch without these names turns the workaround off
(``available()``), and the export then stops with torch's own message. The patches are
process-wide while a trace runs: exports in two threads at once are not supported.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch

from capture.size_tests import carry_guard_lines, outer_envs


def _tracer_class():
    try:
        from torch._dynamo.output_graph import LazyProxy, SubgraphTracer
    except ImportError:
        return None, None
    if not callable(getattr(SubgraphTracer, "lift_tracked_freevar_to_input", None)):
        return None, None
    return SubgraphTracer, LazyProxy


def _check_manager():
    try:
        from torch._dynamo.guards import CheckFunctionManager
    except ImportError:
        return None
    return CheckFunctionManager


def available() -> bool:
    """Whether this torch has the flag, the tracer method and the guard check the workaround
    uses."""
    return callable(getattr(torch.compiler, "_non_strict_tracing_context", None)) and \
        hasattr(torch.compiler, "_is_non_strict_tracing_flag") and \
        _tracer_class()[0] is not None and _check_manager() is not None


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


def _checked(original):
    """``CheckFunctionManager.__init__`` run with the flag cleared: Dynamo then checks the
    guards its trace of stitch's function made against the frame's own (fake) inputs, as it
    does outside the flag. That check is what puts a size test the function decided
    (``if x.shape[0] >= 6:``, a fresh symbol in Dynamo's trace) on the input's own symbol,
    so torch.export keeps it as a guard of the program."""

    def build(self, f_code, output_graph, *args, **kwargs):
        envs = outer_envs(getattr(output_graph, "local_scope", {}))
        counts = {id(env): len(env.guards) for env in envs}
        old = torch.compiler._is_non_strict_tracing_flag
        torch.compiler._is_non_strict_tracing_flag = False
        try:
            built = original(self, f_code, output_graph, *args, **kwargs)
        finally:
            torch.compiler._is_non_strict_tracing_flag = old
        try:  # the user's line, for the size-test rewrite: a note, never an error
            carry_guard_lines(output_graph, envs, counts)
        except Exception:  # noqa: BLE001 - no line: the guard stays, loud
            pass
        return built

    build.__wrapped__ = original
    return build


@contextlib.contextmanager
def _lifting() -> Iterator[None]:
    tracer, _ = _tracer_class()
    manager = _check_manager()
    original = tracer.lift_tracked_freevar_to_input
    nested = hasattr(original, "__wrapped__")  # a cond inside one being traced
    if not nested:
        tracer.lift_tracked_freevar_to_input = _realised(original)
        manager.__init__ = _checked(manager.__init__)
    try:
        with torch.compiler._non_strict_tracing_context():
            yield
    finally:
        if not nested:
            tracer.lift_tracked_freevar_to_input = original
            manager.__init__ = manager.__init__.__wrapped__


def lifted(call: Callable[[], Any]) -> Any:
    """``call()`` (a torch.cond or torch.while_loop over stitch's functions), traced inside
    ``_lifting()`` so that its functions may read sizes known only at run time
    through their closure, with Dynamo's check of its guards against the inputs kept
    (``_checked``): a size test decided in a function (``if x.shape[0] >= 3:``, a dimension
    exported dynamic) reaches the program's checks (loud) instead of being decided for the
    examples' sizes with no check left (silent)."""
    if torch.compiler.is_dynamo_compiling() or not available():
        return call()
    with _lifting():
        return call()
