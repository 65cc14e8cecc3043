"""Which Python numbers are only known at run time, also while Dynamo traces.

Under Dynamo a ``SymBool``/``SymInt``/``SymFloat`` passes ``isinstance(value, bool)`` (and
``int``, ``float``) and fails ``isinstance(value, torch.SymBool)``: rewritten code cannot
tell ``boxes.numel() > 4000`` after mask indexing (a size from data) from ``True``. Dynamo
itself knows: ``comptime`` reads its view of the variable while it traces.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch._dynamo.comptime import comptime

SYMBOLIC = (torch.SymBool, torch.SymInt, torch.SymFloat)
NUMBERS = (bool, int, float, *SYMBOLIC)


def number_kind(value: Any) -> str:
    """``"constant"`` (a plain Python value), ``"size"`` (a symbolic number with no value
    known while tracing, all of whose symbols are sizes: after ``nonzero``, mask indexing),
    ``"unbacked"`` (likewise, from a number read from a tensor) or ``"symbolic"`` (one with
    a hint, from a dynamic input shape)."""
    if not torch.compiler.is_dynamo_compiling():
        if not isinstance(value, SYMBOLIC):
            return "constant"
        return _unbacked_kind(value)
    kind = "symbolic"  # what stitch assumed before it could ask (a torch without comptime)
    comptime(_mark_kind)  # sets ``kind`` in this frame while Dynamo traces it
    return kind


def number_truth(value: Any) -> Any:
    """Python's truth of a number, kept symbolic: a ``bool`` or ``SymBool`` as it is, any
    other number ``!= 0``. The bool test comes first: torch (2.14.1) writes ``SymBool != 0``
    as the constant ``True`` (sympy's ``Ne`` of a relational and 0), which dropped the test
    (``k < 3`` in a loop's condition) and, named ``True``, stood in for other asserted
    truths of the graph; and under Dynamo a ``SymBool`` passes ``isinstance(value, bool)``
    only."""
    return value if isinstance(value, bool | torch.SymBool) else value != 0


def is_unbacked(value: Any) -> bool:
    return isinstance(value, NUMBERS) and number_kind(value) in ("unbacked", "size")


def is_size(value: Any) -> bool:
    """A number only known at run time that is a size (every symbol in it)."""
    return isinstance(value, NUMBERS) and number_kind(value) == "size"


def is_constant(value: Any) -> bool:
    return number_kind(value) == "constant"


def _unbacked_kind(value: Any) -> str:
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    symbols = free_unbacked_symbols(value)
    if not symbols:
        return "symbolic"
    env = getattr(value.node, "shape_env", None)
    sizes = env is not None and all(s in env.size_like for s in symbols)
    return "size" if sizes else "unbacked"


def _mark_kind(ctx) -> None:
    from torch._dynamo.variables import ConstantVariable

    try:
        tx = ctx._i_will_not_complain_if_bc_breaks_InstructionTranslator()
        var = tx.symbolic_locals["value"]
        if var.is_python_constant():
            kind = "constant"
        else:
            number = getattr(var, "sym_num", None)
            kind = _unbacked_kind(number) if isinstance(number, SYMBOLIC) else "symbolic"
    except Exception:  # noqa: BLE001 - another torch's Dynamo: ``kind`` keeps its default
        return
    tx.symbolic_locals["kind"] = ConstantVariable.create(kind)


def shape_env_of(values: Any):
    """The shape environment of the trace in progress: that of a symbolic number among
    ``values`` (arms that take only sizes), else of the trace's fake mode; None in eager."""
    import torch.utils._pytree as pytree
    from torch._guards import detect_fake_mode

    for leaf in pytree.tree_leaves(values):
        if isinstance(leaf, torch.SymInt | torch.SymFloat | torch.SymBool):
            return leaf.node.shape_env
    mode = detect_fake_mode(values) or detect_fake_mode()
    return getattr(mode, "shape_env", None)


@contextlib.contextmanager
def untraced_probe(operands: tuple):
    """Runs its body on the fake ``operands`` with nothing traced into the graph, as a body
    being traced (``in_traced_body``), and with the guards it would record suppressed: a
    size a probed arm tests is decided at its traced value, no guard on the program. The
    numbers it reads from tensors are not the program's: their pending symbols are put back
    as they were."""
    from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing

    from .rt_state import in_traced_body

    env = shape_env_of(operands)
    pending = list(env.pending_fresh_unbacked_symbols) if env is not None else None
    suppress = env.suppress_guards() if env is not None else contextlib.nullcontext()
    try:
        with disable_proxy_modes_tracing(), in_traced_body(), suppress:
            yield
    finally:
        if env is not None:
            env.pending_fresh_unbacked_symbols[:] = pending
