"""Ops whose output size comes from data, pinned to the sizes example 0 gave (only with
``Settings(allow_guards=True)``; with the reads of rt_pins.py).

``torch.repeat_interleave(heights, counts)`` or ``torch.arange(counts.sum())`` at a site a
refusal left makes a size torch.export can only name (an unbacked symbol); where two such
sizes meet (``arange(n) - starts``) it cannot decide they agree, and the export fails. At
the sites the pinned export takes as they are, each such op's output is given the shape
example 0's eager run gave there (same call order), with a check in the graph that the size
is that one, which raises SpecializationError naming the op and the site otherwise.
The values are the op's own: the output is padded to at least that size and cut there, which
names the size without asking the tracer to decide anything.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_map

from .rt_checks import GUARD_ERROR, encode_message, run_check
from .rt_state import is_tracing

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep


@dataclass
class SizePin:
    """One site's ops in example 0's eager run: op name -> each call's output shapes."""

    location: str
    calls: dict[str, list[list[tuple[int, ...]]]] = field(default_factory=dict)
    used: dict[str, int] = field(default_factory=dict)
    fixed: set[str] = field(default_factory=set)  # ops whose size the last trace pinned


def _user_location() -> str | None:
    """file:line of the nearest frame outside torch and this module."""
    frame = sys._getframe(2)
    while frame is not None and (frame.f_code.co_filename.startswith(_TORCH_DIR)
                                 or frame.f_code.co_filename == __file__):
        frame = frame.f_back
    return None if frame is None else f"{frame.f_code.co_filename}:{frame.f_lineno}"


def _name(func) -> str:
    """``torch.arange``, ``Tensor.repeat_interleave``: the op as the model's source names it."""
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))
    owner, _, short = name.rpartition(".")
    if owner in ("_VariableFunctionsClass", "_VariableFunctions"):
        return f"torch.{short}"
    return f"Tensor.{short}" if owner in ("TensorBase", "Tensor") else name


class _Recording(TorchFunctionMode):
    """Output shapes of the torch calls made at ``lines`` (file -> line numbers)."""

    def __init__(self, lines: dict[str, set[int]]) -> None:
        super().__init__()
        self.lines, self.found = lines, {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        location = _user_location() if self.lines else None
        if location is not None:
            filename, line = location.rsplit(":", 1)
            if int(line) in self.lines.get(filename, ()):
                pin = self.found.setdefault(location, SizePin(location))
                pin.calls.setdefault(_name(func), []).append(
                    [tuple(t.shape) for t in tree_flatten(out)[0]
                     if isinstance(t, torch.Tensor)])
        return out


class _Pinning(TorchFunctionMode):
    """While torch.export traces: outputs of a symbolic size at the pinned sites take the
    shape recorded for that call."""

    def __init__(self, pins: dict[str, SizePin]) -> None:
        super().__init__()
        self.pins = pins
        self.labels = {loc: f"Z{i}" for i, loc in enumerate(sorted(pins), 1)}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not is_tracing():
            return out
        location = _user_location()
        pin = self.pins.get(location) if location is not None else None
        if pin is None:
            return out
        name = _name(func)
        index = pin.used.get(name, 0)
        pin.used[name] = index + 1
        calls = pin.calls.get(name, [])
        if index >= len(calls):
            return out
        shapes = iter(calls[index])

        def fixed(t):
            if not isinstance(t, torch.Tensor):
                return t
            shape = next(shapes, None)
            if shape is None or all(isinstance(d, int) for d in t.shape):
                return t
            pin.fixed.add(name)
            return _static(t, shape, self.labels[location], name, location)

        return tree_map(fixed, out)


def _static(t: torch.Tensor, shape: tuple[int, ...], label: str, name: str, location: str):
    """``t`` with the static ``shape`` example 0 gave, checked in the graph to be its size."""
    what = (f"stitch pinned the output size of `{name}` ({location}) to {shape}, the size "
            "example 0 gave there (Settings.allow_guards: the program's shapes follow it); "
            "this input gives another. Export with an example of this input's values, or "
            "run the model eagerly.")
    if len(shape) != t.dim():
        return t
    sizes = torch.stack([torch.scalar_tensor(d, dtype=torch.int64, device=t.device)
                         for d in t.shape])
    ok = (sizes == torch.as_tensor(shape, dtype=torch.int64, device=t.device)).all()
    run_check(label, ok, GUARD_ERROR, encode_message(what))
    n = math.prod(shape)
    flat = t.reshape(-1)
    # at least n long, cut at n: the same values where the size is n, a size named n
    return torch.cat([flat, flat.new_zeros(n)])[:n].reshape(shape)


@contextlib.contextmanager
def recording_sizes(lines: dict[str, set[int]]) -> Iterator[dict[str, SizePin]]:
    """The output shapes of the torch calls an eager run makes at ``lines``."""
    mode = _Recording(lines)
    with mode:
        yield mode.found


_ACTIVE: list[dict[str, SizePin]] = [{}]


@contextlib.contextmanager
def pinned_sizes(pins: dict[str, SizePin]) -> Iterator[None]:
    """The pins torch.export's traces apply (``tracing_sizes``) while this is entered."""
    _ACTIVE.append(pins)
    try:
        yield
    finally:
        _ACTIVE.pop()


@contextlib.contextmanager
def tracing_sizes() -> Iterator[None]:
    """Around one torch.export trace: the active size pins applied, each from its first
    call again."""
    pins = _ACTIVE[-1]
    if not pins:
        yield
        return
    for pin in pins.values():
        pin.used.clear()
        pin.fixed.clear()
    with _Pinning(pins):
        yield
