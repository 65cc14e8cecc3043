"""Code that asks whether it is being traced, answered as in eager.

Some models compute something else when traced: RecurrentGemma 4.52 drops a normalising
multiplier when ``is_torchdynamo_compiling()`` (its RG-LRU); transformers 5's mask helpers
build another attention mask when ``is_tracing(mask)``. torch.export's program then differs
from eager, and verification refuses it. Where that happened, stitch exports again with
each such probe, bound by name in a module of the model's packages, answering what it
answers in eager (``False``), so the graph computes what eager computes — the eager path
may break more, and its breaks are rewritten like any other. The probes go back when
``stitch.export`` returns; the program's graph holds no probe. Verification judges the
result as always.

A probe reached as an attribute (``torch.compiler.is_compiling()``) is not answered: torch
itself asks it while tracing.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import types
from collections.abc import Iterator

import torch

# (module, function name) of functions that answer "is this being traced?"; each answers
# False in eager (no compile, no export, no jit trace, no stream capture, a real tensor)
PROBES: tuple[tuple[str, str], ...] = (
    ("transformers.utils.import_utils", "is_torchdynamo_compiling"),
    ("transformers.utils.import_utils", "is_torchdynamo_exporting"),
    ("transformers.utils.import_utils", "is_tracing"),
    ("transformers.utils.import_utils", "is_torch_fx_proxy"),
    ("transformers.utils.import_utils", "is_fake_tensor"),
    ("transformers.utils.import_utils", "is_jit_tracing"),
    ("torch.compiler", "is_compiling"),
    ("torch.compiler", "is_exporting"),
    ("torch.compiler", "is_dynamo_compiling"),
    ("torch._dynamo", "is_compiling"),
    ("torch.jit", "is_tracing"),
)


def _eager_answer(*args, **kwargs) -> bool:
    """What a tracing probe answers in eager."""
    return False


def _probe_functions() -> dict[int, str]:
    found: dict[int, str] = {}
    for module_name, name in PROBES:
        module = sys.modules.get(module_name)
        if module is None and module_name.startswith("torch"):
            module = importlib.import_module(module_name)
        fn = getattr(module, name, None) if module is not None else None
        if callable(fn):
            found[id(fn)] = f"{module_name}.{name}"
    return found


def bound_probes(model: torch.nn.Module) -> list[tuple[types.ModuleType, str, str]]:
    """(module, global name, probe) for each probe bound by name in a loaded module of the
    packages the model's classes come from (not torch's own modules). Not in the module
    that defines a probe: the probes there call each other (transformers' ``is_tracing``
    asks ``is_torchdynamo_compiling`` first, then the stream-capture checks Dynamo cannot
    trace), so the probes a module keeps traced (``eager_probes``) keep their own answers."""
    packages = {type(m).__module__.split(".")[0] for m in model.modules()} - {"torch"}
    probes = _probe_functions()
    bound = []
    for module_name, module in list(sys.modules.items()):
        if module is None or module_name.split(".")[0] not in packages:
            continue
        for name, value in list(vars(module).items()):
            if callable(value) and id(value) in probes \
                    and getattr(value, "__module__", None) != module_name:
                bound.append((module, name, probes[id(value)]))
    return bound


@contextlib.contextmanager
def answered_as_eager(bound: list[tuple[types.ModuleType, str, str]]) -> Iterator[None]:
    saved = [(module, name, vars(module)[name]) for module, name, _ in bound]
    try:
        for module, name, _ in bound:
            setattr(module, name, _eager_answer)
        yield
    finally:
        for module, name, original in saved:
            setattr(module, name, original)
