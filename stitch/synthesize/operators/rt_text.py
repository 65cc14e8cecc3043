"""The text of a print/log/warn call in a branch with side effects: its arguments as they
are at the call (``taken``), and an f-string's text, now or from the graph's values once
traced (``text``)."""

from __future__ import annotations

from typing import Any

import torch

from ...epilogue.formatting import Text
from .rt_state import RT, is_tracing
from .rt_values import same_kind


def taken(args: tuple) -> tuple:
    """A print/log/warn call's arguments in a branch, as they are at the call: tensors (also
    those in a ``Text``) copied, so a later in-place write in the branch does not reach
    what is printed (the calls are made, or replayed, after the branch)."""
    def copy(v):  # a read stays marked as one: printed as the number it was
        return same_kind(v.clone(), v) if isinstance(v, torch.Tensor) else v

    return tuple(Text(a.pieces, tuple(copy(v) for v in a.values)) if isinstance(a, Text)
                 else copy(a) for a in args)


def percent_values(right: Any, slots: int) -> tuple:
    """The arguments ``fmt % right`` formats: a tuple is the arguments, anything else the
    one argument (``percent_format``); a count other than ``slots`` raises as ``%`` does."""
    values = right if isinstance(right, tuple) else (right,)
    if len(values) != slots:
        raise TypeError("not all arguments converted during string formatting"
                        if len(values) > slots else "not enough arguments for format string")
    return values


def text(pieces: tuple, values: tuple) -> Any:
    """An f-string in a branch with side effects (``branch_effects`` rewrote it): its text
    now when nothing is traced, else a ``Text`` the epilogue formats from the graph's
    values (formatting a traced tensor inside torch.cond is impossible)."""
    if RT.bodies or (not torch.compiler.is_dynamo_compiling() and is_tracing()):
        return Text(pieces, values)  # a cond's arm being traced, or its probe
    return _formatted(pieces, values)  # eager, or the census under torch.compile


@torch.compiler.disable
def _formatted(pieces: tuple, values: tuple) -> str:
    """The f-string's text (Dynamo cannot run ``format`` on a traced tensor: under
    torch.compile this is a graph break, as the f-string itself was)."""
    return str(Text(pieces, values))
