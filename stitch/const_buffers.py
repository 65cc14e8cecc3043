"""Integer buffers the forward only reads, read as constants while torch.export traces.

EnCodec keeps its convolutions' stride, kernel size and padding as 0-d int64 buffers
(``nn.Buffer(..., persistent=False)``) and computes each padding from them and the input's
length, which is static: ``F.pad(x, (pad_left, pad_right + extra))``, ``if length <=
max_pad``. To torch.export a buffer is data, so every padding is an unbacked size and the
``if`` a guard on data: refused. Read as a tensor made in the trace (``torch.tensor(7)``),
the same value is a constant torch's fake tensors fold through arithmetic and ``.item()``,
so the padding is a plain int again and the model exports as written::

    self.padding_total (a buffer)           ->  torch.tensor(5) each time it is read
    extra = ideal_length - length           ->  a constant after folding

Only buffers a state dict cannot change and the forward cannot have written: non-persistent,
of an integer or bool dtype, one element, and named in no assignment, augmented assignment,
item store or in-place method call in the methods of the module's class (``__init__`` aside). The module keeps
the buffer (the program's signature lists it, unread); reads go to a class property on
stitch's own copy, never on the user's model. The program is verified like any other.
"""

from __future__ import annotations

import inspect
import re

import torch

_INPLACE = r"\.{name}(?:\s*(?:[-+*/%&|^@]|//|<<|>>|\*\*)?=(?!=)|\[[^\]]*\]\s*=(?!=)|\.\w+_\()"


def constant_buffers(module: torch.nn.Module) -> list[str]:
    """Names of ``module``'s own buffers that may be read as constants."""
    found = []
    for name, value in module._buffers.items():
        if (value is None or name not in module._non_persistent_buffers_set
                or value.is_floating_point() or value.is_complex() or value.numel() != 1):
            continue
        if not _written_in_source(type(module), name):
            found.append(name)
    return found


def fold_constant_buffers(root: torch.nn.Module) -> list[str]:
    """On stitch's copy ``root``: reads of each constant buffer give a tensor made in the
    trace. Returns the buffers' paths."""
    folded = []
    for path, module in root.named_modules():
        names = constant_buffers(module)
        if not names:
            continue
        cls = type(module)
        props = {name: _reader(module._buffers[name]) for name in names}
        module.__class__ = type(cls.__name__, (cls,), {
            **props, "__setattr__": _refusing(cls, frozenset(names)),
            "__module__": cls.__module__, "__qualname__": cls.__qualname__})
        folded += [f"{path}.{n}" if path else n for n in names]
    return folded


def folded_note(paths: list[str]) -> str:
    names = sorted({p.rsplit(".", 1)[-1] for p in paths})
    return (f"{len(paths)} integer buffer(s) read as constants while exporting "
            f"(non-persistent, never written by the forward: {', '.join(names)})")


def _reader(buffer: torch.Tensor) -> property:
    value, dtype, device, shape = buffer.item(), buffer.dtype, buffer.device, buffer.shape

    def read(self) -> torch.Tensor:
        return torch.tensor(value, dtype=dtype, device=device).reshape(shape)
    return property(read)


def _refusing(cls: type, names: frozenset):
    """``__setattr__`` that refuses the folded names: an assignment the source scan missed
    (from another class) fails the export instead of leaving a stale constant."""
    def setattr_(self, attr, value):
        if attr in names:
            raise AttributeError(
                f"{cls.__qualname__}.{attr} was read as a constant while exporting (an "
                "integer buffer no method of its class writes), but the forward assigns it")
        cls.__setattr__(self, attr, value)
    return setattr_


def _written_in_source(cls: type, name: str) -> bool:
    """Whether a method of ``cls`` (its own classes, not torch.nn's; ``__init__`` aside, where
    the buffer is registered) names ``name`` as a write target; unreadable source counts as
    written."""
    pattern = re.compile(_INPLACE.format(name=re.escape(name)))
    setter = re.compile(rf"setattr\([^,]+,\s*['\"]{re.escape(name)}['\"]")
    for klass in cls.__mro__:
        if klass.__module__.startswith("torch.") or klass is object:
            continue
        for attr, member in vars(klass).items():
            fn = getattr(member, "__func__", member)
            fn = getattr(fn, "fget", fn)  # a property's getter
            if attr == "__init__" or not inspect.isfunction(fn):
                continue
            try:
                source = inspect.getsource(fn)
            except (OSError, TypeError):
                return True
            if pattern.search(source) or setter.search(source):
                return True
    return False
