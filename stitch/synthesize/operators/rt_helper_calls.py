"""A helper function called in a branch with side effects, deferred to the epilogue: what
the epilogue needs to call it again, checked when the call is recorded."""

from __future__ import annotations

import torch

from ...epilogue.formatting import Text
from ...epilogue.replay import helper
from ...errors import UnsupportedSideEffectError


def helper_options(options: dict, args: tuple, where: str) -> dict:
    """A deferred helper call's JSON options: the epilogue calls it by module and name, so
    the name must reach the same function there; its arguments must be tensors or plain
    values (the epilogue holds nothing else)."""
    options = dict(options)
    function = options.pop("callable")
    if helper(options) is not function:
        raise UnsupportedSideEffectError(
            f"{where}: helper {options['name']!r}, called in a branch, is not the module "
            f"global {options['module']}.{options['name']} (a closure variable or a local "
            "name); the epilogue calls deferred helpers by module and name. Bind the helper "
            "at module level, or call it outside the branch.")
    for a in args:
        if not isinstance(a, torch.Tensor | torch.SymInt | torch.SymFloat | torch.SymBool
                          | bool | int | float | str | Text | None):
            raise UnsupportedSideEffectError(
                f"{where}: helper {options['name']!r} is called in a branch with a "
                f"{type(a).__name__} argument; stitch defers helper calls whose arguments are "
                "tensors or plain values. Pass the tensors the helper needs, or call it "
                "outside the branch.")
    return options
