"""The program's module at the start of each verification: its tensors put back in place.

Verification runs the program on every example in turn (buffer updates compound as in the
model), and each verification (the examples, then each size probe) starts from the program
as exported. A graph changes its module only by writing the module's tensors in place (a
buffer update's ``copy_``, an in-place op kept on a buffer, a parameter or a constant), and
every in-place write, through a view too, moves the tensor's version counter. So the
tensors whose counter moved are put back from copies taken first: the start a deep copy of
the module would give, without copying its graph and generating its code again for each
verification (``start.fresh()``: the same module, the tensors a run wrote copied back).
"""

from __future__ import annotations

import copy

import torch

from capture.shared_weights import shared_parameters


class ProgramStart:
    """``module`` as it is now, to start each verification from (``fresh``)."""

    def __init__(self, module: torch.nn.Module) -> None:
        self.module = module
        # a tied weight once; the model's parameters an export shares are checked by it
        shared = shared_parameters()
        tensors = {id(t): t for t in _tensors(module) if id(t) not in shared}.values()
        self.saved = [(t, t.detach().clone(), t._version) for t in tensors]
        # an object a graph may change otherwise (a custom class's state): copies instead
        self.copies = any(isinstance(v, torch.ScriptObject)
                          for m in module.modules() for v in vars(m).values())

    def fresh(self) -> torch.nn.Module:
        """The module as it was when this was made, to run: the module itself with every
        tensor a run wrote since put back (or, where it holds objects other than tensors, a
        copy of it, which is never run itself then)."""
        if self.copies:
            return copy.deepcopy(self.module)
        self.put_back()
        return self.module

    def put_back(self) -> None:
        """Every tensor of the module a run wrote, back to its value when this was made."""
        with torch.no_grad():
            for i, (tensor, value, version) in enumerate(self.saved):
                if tensor._version != version:
                    tensor.copy_(value)
                    self.saved[i] = (tensor, value, tensor._version)


def _tensors(module: torch.nn.Module):
    """Every tensor the module holds: parameters, buffers, and plain tensor attributes
    (the constants an unlifted program keeps)."""
    for m in module.modules():
        yield from (p for _, p in m.named_parameters(recurse=False))
        yield from (b for _, b in m.named_buffers(recurse=False))
        yield from (v for v in vars(m).values() if isinstance(v, torch.Tensor))
