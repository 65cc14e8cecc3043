"""Running a stitched graph like the model: the numbers it takes as 0-d tensors made
tensors, the graph, then its epilogue replayed.

Shared by the program (``stitch.program``), verification and every deployment
(``stitch.deploy``); it depends on nothing later in the pipeline.
"""

from __future__ import annotations

import torch

from .epilogue import Epilogue, replay
from .epilogue.rebuilt import quiet_rebuild
from .errors import check_failure
from .number_inputs import graph_inputs
from .synthesize.operators.rt_union import has_alternatives, resolve
from .synthesize.operators.runtime import parse_check


def run_with_epilogue(module, epilogue: Epilogue, args, kwargs, printer=None, lists=None):
    # numbers the graph takes as 0-d tensors (number_inputs.py): made tensors first
    args, kwargs = graph_inputs(epilogue.number_inputs, args, kwargs)
    try:
        with quiet_rebuild(epilogue):  # its output classes' warnings: the replay's to say
            out, extras = module(*args, **kwargs)
    except RuntimeError as e:
        original = original_exception(e, epilogue.messages)
        if original is e:
            raise
        raise original from None  # the model's exception as the model raised it
    replay(epilogue, extras, printer, lists)
    # a value whose structure follows the data: the side the graph took (rt_union.py); the
    # output is rebuilt only then (rebuilding calls its classes' constructors again)
    with quiet_rebuild(epilogue):
        out = resolve(out) if has_alternatives(out) else out
        return python_numbers(out, epilogue.scalars) if epilogue.scalars else out


_NUMBERS = {"bool": bool, "int": int, "float": float}


def python_numbers(out, scalars: tuple[tuple[int, str], ...]):
    """``out`` with the leaves the model returns as Python numbers made numbers again (the
    graph returns them as 0-d tensors). The kind is the tensor's own where it has one (a
    read is a double, an int64 or a bool, as Python's number would be): a value whose kind
    follows the data (``max(v, 0)`` of a float read is the int 0 or the float) is never cut
    to the kind example 0 gave (6.5 returned as 6); ``kind`` (example 0's) is for the rest."""
    from torch.utils import _pytree as pytree

    leaves, spec = pytree.tree_flatten(out)
    for index, kind in scalars:
        leaf = leaves[index] if index < len(leaves) else None
        if hasattr(leaf, "numel") and leaf.numel() == 1:
            dtype = getattr(leaf, "dtype", None)
            own = (None if dtype is None else "bool" if dtype == torch.bool
                   else "float" if dtype.is_floating_point else "int")
            leaves[index] = _NUMBERS[own or kind](leaf)
    return pytree.tree_unflatten(leaves, spec)


def scalar_leaves(out) -> tuple[tuple[int, str], ...]:
    """The leaves of a model's output that are Python numbers, with their types."""
    from torch.utils import _pytree as pytree

    return tuple((i, type(leaf).__name__) for i, leaf in enumerate(pytree.tree_leaves(out))
                 if type(leaf) in (bool, int, float))


def original_exception(error: RuntimeError, messages=()) -> BaseException:
    """A failed in-graph check re-raises as the exception type the model raised. The check's
    error may sit under another: a ``torch.compile``d module that raises inside the graph
    surfaces as a Dynamo error about the handler, with the check's error as its context.
    ``messages``: the program's long check messages (``Epilogue.messages``)."""
    parsed, cause, messages = None, error, dict(messages)
    while parsed is None and cause is not None:
        parsed = parse_check(str(cause), messages)
        cause = cause.__cause__ or cause.__context__
    if parsed is None:
        return error
    _site, type_name, message = parsed
    return check_failure(type_name, message) or error
