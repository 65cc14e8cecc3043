"""``t.contiguous()`` on a tensor of symbolic sizes, traced without a guard on its layout.

torch's ``contiguous`` returns the tensor itself where it is contiguous and a copy
otherwise. On a tensor whose strides are symbolic, torch takes that test for the traced
sizes and records a guard on them: a slice of a padded tensor (``x[:, :H, :W]`` of
``x`` padded up to a multiple of the window) is contiguous exactly where no padding was
added, so the program raises ``Guard failed`` on every size that is padded, or on every
size that is not, whichever the traced example was not (window attention that pads every
input to whole windows: pad, attend per window, ``x[:, :H, :W].contiguous()``).

While ``contiguity_unguarded()`` is active (stitch's torch.export traces), a
``contiguous`` whose answer the sizes' ranges do not decide is traced as
``clone(memory_format=...)``: the same values, the same (contiguous) layout, a copy
where eager would have given the tensor itself; one the ranges decide is as torch makes
it. Only ``torch.contiguous_format`` is handled (``channels_last`` as torch makes it).
Not inside a cond's arm, which torch.cond has Dynamo trace without this mode: there the
converter's ``contiguous`` does the same (synthesize/canonicalize/contiguous_copies.py).

The same context keeps torch.fx's record of a traced tensor's layout (``shape_prop``)
from guarding: it is set from what the sizes' ranges decide (``_recorded_layout``).

Limit: where the tensor was contiguous, eager's result is the tensor itself, so a later
in-place write to the one shows in the other; in the graph it does not. Verification
compares the outputs, buffers and state such a write could reach, on every example.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.fx.experimental.symbolic_shapes import statically_known_true
from torch.fx.passes import shape_prop
from torch.overrides import TorchFunctionMode

from .user_frames import skipped_by_torch


def _symbolic(t: torch.Tensor) -> bool:
    return any(not isinstance(v, int) for v in (*t.shape, *t.stride()))


def known_contiguous(t: torch.Tensor) -> bool:
    """Whether ``t`` is contiguous on every size its symbols' ranges allow (no guard)."""
    if statically_known_true(t.numel() == 0):
        return True
    expected = 1
    for size, stride in reversed(list(zip(t.shape, t.stride(), strict=True))):
        if statically_known_true(size == 1):
            continue
        if not statically_known_true(stride == expected):
            return False
        expected = expected * size
    return True


class _Unguarded(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor.contiguous and args and isinstance(args[0], FakeTensor):
            t = args[0]
            layout = kwargs.get("memory_format", args[1] if len(args) > 1 else
                                torch.contiguous_format)
            if layout is torch.contiguous_format and _symbolic(t):
                return t if known_contiguous(t) else \
                    t.clone(memory_format=torch.contiguous_format)
        return func(*args, **kwargs)


def _recorded_layout(original):
    """torch.fx's record of a traced tensor's layout (``shape_prop``: the ``memory_format``
    of a node's ``tensor_meta``), meant to be set only where it holds for every size, asks
    with ``guard_or_true``, which guards on sizes with a hint: recording the layout of a cut
    ``x[:, :H, :W]`` would make the program guard that nothing was padded. On symbolic strides the
    record here is what the ranges decide (contiguous where ``known_contiguous``, no other
    layout claimed), with no guard."""
    def recorded(a, *, memory_format):
        if isinstance(a, FakeTensor) and _symbolic(a):
            return memory_format is torch.contiguous_format and known_contiguous(a)
        return original(a, memory_format=memory_format)

    recorded.__wrapped__ = original
    return recorded


@contextlib.contextmanager
def contiguity_unguarded() -> Iterator[None]:
    original = getattr(shape_prop, _LAYOUT, None)
    if original is not None and not hasattr(original, "__wrapped__"):
        setattr(shape_prop, _LAYOUT, _recorded_layout(original))
    try:
        with skipped_by_torch(__file__), _Unguarded():
            yield
    finally:
        if original is not None and not hasattr(original, "__wrapped__"):
            setattr(shape_prop, _LAYOUT, original)


_LAYOUT = "is_contiguous_for_memory_format_or_false"  # the name shape_prop imports
