"""Exact stand-ins for library calls torch.compile and torch.export cannot trace, installed
while stitch traces (census, export, forced sides) and never in the user's eager runs.

Each shim is exact by construction: it takes over only when the original call would leave
every tensor as it is, and otherwise calls the original. Recorded as data (``SHIMS``) so the
report and the docs can list them.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import torch

_original_to = torch.nn.Module.to


def _module_to(self, *args, **kwargs):
    """``module.to(dtype/device)`` when every parameter and buffer already has that dtype and
    device: the original rebinds each tensor to itself (``param.data = param``), which fake
    tensors refuse ("Couldn't swap Linear.weight") and Dynamo breaks on; return ``self``."""
    try:
        device, dtype, _non_blocking, memory_format = torch._C._nn._parse_to(*args, **kwargs)
    except Exception:  # noqa: BLE001 - the original raises the user's error
        return _original_to(self, *args, **kwargs)
    if memory_format is not None:
        return _original_to(self, *args, **kwargs)
    device = torch.device(device) if device is not None else None
    for t in (*self.parameters(), *self.buffers()):
        if device is not None and t.device != device:
            return _original_to(self, *args, **kwargs)
        if dtype is not None and (t.is_floating_point() or t.is_complex()) and t.dtype != dtype:
            return _original_to(self, *args, **kwargs)
    return self


_original_batch_norm = torch.nn.functional.batch_norm


def _batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
                momentum=0.1, eps=1e-5):
    """``F.batch_norm`` in inference (running statistics, not training): the op the
    composite calls for a non-empty input, called directly. The composite first tests
    ``input.numel() == 0`` (to return an empty result by another path), and that test on a
    batch known only at run time (a detection head's rois) is a guard no trace can make
    ("Could not guard on data-dependent expression Eq(12544*u17, 0)"); the op gives the
    same empty result for an empty input. Anything else: the original."""
    if training or running_mean is None or running_var is None \
            or not all(isinstance(t, torch.Tensor | None) for t in (input, weight, bias)) \
            or torch.overrides.has_torch_function_variadic(input, running_mean, running_var,
                                                           weight, bias):
        return _original_batch_norm(input, running_mean, running_var, weight, bias, training,
                                    momentum, eps)
    return torch.ops.aten._native_batch_norm_legit_no_training(
        input, weight, bias, running_mean, running_var, momentum, eps)[0]


@dataclass(frozen=True)
class Shim:
    owner: object  # a class or a module
    attr: str
    replacement: object
    what: str


SHIMS = (
    Shim(torch.nn.Module, "to", _module_to,
         "module.to(dtype/device) that converts nothing returns the module (transformers' "
         "Switch router: self.classifier = self.classifier.to(self.dtype))"),
    Shim(torch.nn.functional, "batch_norm", _batch_norm,
         "batch norm in inference calls its op directly, without the composite's test for "
         "an empty input, which a batch known only at run time cannot pass (Faster R-CNN "
         "v2's box head)"),
)

# draws from Python's or numpy's generator no output depends on (capture/draws.py): while
# stitch traces, each such function returns the number it drew when measured (Dynamo
# breaks on numpy's generator); the epilogue makes the real draws after the graph
_dead_draws: dict[tuple[str, str], object] = {}


def know_dead_draws(draws) -> None:
    """The dead draws of the model being exported (a plain-number result each)."""
    _dead_draws.clear()
    for d in draws:
        if type(d.value) in (bool, int, float):
            _dead_draws.setdefault((d.module, d.name), d.value)


def _stand_in(value):
    def drawn(*args, **kwargs):
        return value
    return drawn


_lock = threading.RLock()
_originals: list[tuple[type, str, object]] = []  # (owner, attr, original) while installed
_depth = [0]  # nested and concurrent users: the last one out restores


@contextlib.contextmanager
def shimmed() -> Iterator[None]:
    """Install every shim (re-entrant); the originals are back on exit, whatever happens."""
    with _lock:
        if _depth[0] == 0:
            for shim in SHIMS:
                _originals.append((shim.owner, shim.attr, getattr(shim.owner, shim.attr)))
                setattr(shim.owner, shim.attr, shim.replacement)
            for (module, name), value in _dead_draws.items():
                owner = sys.modules.get(module)
                if owner is not None and hasattr(owner, name):
                    _originals.append((owner, name, getattr(owner, name)))
                    setattr(owner, name, _stand_in(value))
        _depth[0] += 1
    try:
        yield
    finally:
        with _lock:
            _depth[0] -= 1
            if _depth[0] == 0:
                while _originals:
                    owner, attr, original = _originals.pop()
                    setattr(owner, attr, original)
