"""Scalar reads pinned to example 0's values (only with ``Settings(allow_guards=True)``).

A read no rewrite removes — ``grid_thw.tolist()`` sizing the aranges, reshapes and splits of
a Qwen-style vision tower, ``lengths.tolist()`` cutting attention into segments — makes the
program's shapes functions of the input's *values*: no one graph takes every value. Asked
for guards, stitch traces such a read as the value example 0 gave (a constant in the graph)
and puts a check in the graph that the input gives that value again; any other value
raises ``SpecializationError`` naming the read's file:line. The program is specialised to
example 0's values there, as deployments of such towers run one program per resolution.

Reads are told apart by where they are called from (file:line of the caller). Only
non-strict torch.export's trace (fake tensors) is answered; eager runs, and Dynamo's
census, read as always. ``recorded`` collects the values from one eager run; ``pinned``
answers them while the export traces.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from capture.source import is_user_file

from .rt_checks import GUARD_ERROR, encode_message, run_check
from .rt_state import is_tracing

# the Tensor methods that read a tensor as Python numbers
READS = ("tolist", "item", "__int__", "__float__", "__index__")


@dataclass
class Pin:
    """One read site: what each of its reads in example 0's eager run returned, in order
    (two tensors read on one line, one line read in every layer)."""

    location: str  # file:line of the call
    function: str  # the calling function's qualified name
    call: str  # e.g. ``.tolist()``
    reads: list[tuple[tuple[int, ...], Any]] = field(default_factory=list)  # (shape, value)
    used: int = 0  # calls answered in the trace in progress
    callers: set[str] = field(default_factory=set)  # file:line of the frames around the read

    def answer(self, tensor: torch.Tensor, site: str) -> Any:
        """The value example 0's read in this place of the order returned, with a check in
        the graph that ``tensor`` holds it."""
        if self.used >= len(self.reads):
            raise PinError(f"{self.location}: `{self.call}` is read more often while tracing "
                           f"than in example 0's eager run ({len(self.reads)} times); the "
                           "reads cannot be pinned")
        shape, value = self.reads[self.used]
        self.used += 1
        static = all(isinstance(d, int) for d in tensor.shape)
        if static and tuple(tensor.shape) != shape:  # the trace differs from eager here
            raise PinError(f"{self.location}: `{self.call}` read a tensor of shape "
                           f"{tuple(tensor.shape)} while tracing, {shape} in example 0's "
                           "eager run; the read cannot be pinned")
        what = (f"stitch pinned `{self.call}` in {self.function} ({self.location}) to the "
                f"value example 0 read there, {_short(value)} (Settings.allow_guards: the "
                "program's shapes follow that value); this input reads another. Export with "
                "an example of this input's values, or run the model eagerly.")
        run_check(site, _holds(tensor, shape, _flat(value), static), GUARD_ERROR,
                 encode_message(what))
        return value


def _holds(tensor: torch.Tensor, shape: tuple[int, ...], flat: list, static: bool):
    """A 0-d bool tensor: ``tensor`` has ``shape`` and holds ``flat``'s values. A size from
    data (symbolic: ``lengths`` of a grid's segments) is compared in the graph too, without
    asking the tracer to decide it (it cannot: "Could not guard on data-dependent")."""
    expected = torch.as_tensor(flat, dtype=tensor.dtype, device=tensor.device)
    values = tensor.reshape(-1)
    if static:
        return (values == expected).all()
    sizes = torch.stack([torch.scalar_tensor(d, dtype=torch.int64, device=tensor.device)
                         for d in tensor.shape]) if tensor.dim() else None
    same = (torch.ones((), dtype=torch.bool, device=tensor.device) if sizes is None else
            (sizes == torch.as_tensor(shape, dtype=torch.int64, device=tensor.device)).all())
    # padded to at least len(flat) and cut there: the same length whatever the size is
    padded = torch.nn.functional.pad(values, (0, len(flat)))[:len(flat)]
    return same & (padded == expected).all()


class PinError(RuntimeError):
    """A pinned read met in the trace in a form example 0's eager run did not have."""


def _flat(value: Any) -> list:
    if isinstance(value, list):
        return [x for v in value for x in _flat(v)]
    return [value]


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


class _State:
    recording: dict[str, Pin] | None = None  # location -> pin, filled by an eager run
    pins: dict[str, Pin] = {}  # location -> pin, answered while tracing
    labels: dict[str, str] = {}  # location -> the check's site label
    sites: frozenset[str] = frozenset()  # the break sites those reads are at


_STATE = _State()


def _classes() -> list[type]:
    """torch.Tensor and the tensor subclasses torch.export traces with that define their own
    reads (FunctionalTensor's and FakeTensor's ``tolist``)."""
    from torch._subclasses.fake_tensor import FakeTensor
    from torch._subclasses.functional_tensor import FunctionalTensor

    return [torch.Tensor, FunctionalTensor, FakeTensor]


# torch.Tensor's own come from its C base (not in its __dict__: put back by deleting ours)
_ORIGINAL = {(cls, name): getattr(cls, name) for cls in _classes() for name in READS
             if cls is torch.Tensor or name in cls.__dict__}
_OWN = {(cls, name) for cls, name in _ORIGINAL if name in cls.__dict__}


def _caller() -> tuple[str, str]:
    frame = sys._getframe(2)  # 0: here, 1: the patched method, 2: its caller
    return f"{frame.f_code.co_filename}:{frame.f_lineno}", frame.f_code.co_qualname


def _callers(depth: int = 8) -> list[str]:
    """file:line of the frames that called the read's caller (a read in a helper: the line
    of the model that called the helper), nearest first."""
    out, frame = [], sys._getframe(3)  # 0: here, 1: the patched method, 2: the read's caller
    while frame is not None and len(out) < depth:
        out.append(f"{frame.f_code.co_filename}:{frame.f_lineno}")
        frame = frame.f_back
    return out


def _patched(cls: type, name: str):
    original = _ORIGINAL[cls, name]
    call = f".{name}()" if not name.startswith("__") else f"{name.strip('_')}(tensor)"

    def read(self, *args, **kwargs):
        if torch.compiler.is_dynamo_compiling():
            return original(self, *args, **kwargs)
        if _STATE.pins and is_tracing():
            location, _ = _caller()
            pin = _STATE.pins.get(location)
            if pin is not None and not args and not kwargs:
                return pin.answer(self, _STATE.labels[location])
            return original(self, *args, **kwargs)
        value = original(self, *args, **kwargs)
        if _STATE.recording is not None and not is_tracing() and not args and not kwargs:
            location, function = _caller()
            if not is_user_file(location.rsplit(":", 1)[0]):  # torch's or stitch's own read
                return value
            pin = _STATE.recording.setdefault(location, Pin(location, function, call))
            pin.reads.append((tuple(self.shape), value))
            pin.callers.update(_callers())
        return value

    read.__name__ = name
    return read


@contextlib.contextmanager
def _methods_patched() -> Iterator[None]:
    for cls, name in _ORIGINAL:
        setattr(cls, name, _patched(cls, name))
    try:
        yield
    finally:
        for (cls, name), original in _ORIGINAL.items():
            if (cls, name) in _OWN:
                setattr(cls, name, original)
            else:
                delattr(cls, name)


@contextlib.contextmanager
def recording() -> Iterator[dict[str, Pin]]:
    """Every scalar read an eager run makes, by the caller's file:line."""
    found: dict[str, Pin] = {}
    previous, _STATE.recording = _STATE.recording, found
    try:
        with _methods_patched():
            yield found
    finally:
        _STATE.recording = previous


@contextlib.contextmanager
def pinned(pins: dict[str, Pin], sites: frozenset[str] = frozenset()) -> Iterator[None]:
    """The reads at ``pins``' locations answer example 0's values while torch.export traces;
    ``sites``: the break sites they are at, which no rewrite touches then."""
    previous = _STATE.pins, _STATE.labels, _STATE.sites
    _STATE.pins, _STATE.sites = pins, sites
    _STATE.labels = {loc: f"P{i}" for i, loc in enumerate(sorted(pins), 1)}
    try:
        with _methods_patched():
            yield
    finally:
        _STATE.pins, _STATE.labels, _STATE.sites = previous


def restart() -> None:
    """A new trace: each pin answers from example 0's first call again."""
    for pin in _STATE.pins.values():
        pin.used = 0


def pinned_sites() -> frozenset[str]:
    """The break sites whose reads are pinned for the export in progress: the census still
    shows them (Dynamo reads as always); no rewrite touches them and none is left."""
    return _STATE.sites | frozenset(_STATE.pins)
