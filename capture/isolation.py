"""Leave the user's world exactly as it was: model, RNG streams, Dynamo state, output.

Capture runs the model several times (eager and compiled). It works on a deep copy of the
model when one can be made, so parameters, buffers and attributes the forward mutates are
never touched; otherwise it snapshots parameters and buffers and restores them.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import copy
import io
import logging
import random
import types
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
from torch._subclasses.fake_tensor import FakeTensor

from .shared_weights import shared_parameters

_QUIET_LOGGERS = ("torch._dynamo", "torch._inductor", "torch.fx.experimental.symbolic_shapes",
                  "torch._subclasses.fake_tensor", "torch._functorch")


# containers outside the model (module globals, class attributes, closure cells) that copies
# of the model keep sharing (``sharing``): id -> object
_SHARED: dict[int, object] = {}
_CONTAINERS = (list, dict, set, collections.deque)


@contextlib.contextmanager
def sharing(values) -> Iterator[None]:
    """While the block runs, ``model_copy`` keeps the containers among ``values`` (and the
    containers they hold, one level down) as they are: a model attribute bound to a module
    global's list (``self.log = LOG``) is that list in the copy too, as in the model. A
    deep copy would cut the link, so stitch's runs would read a list of their own and a
    program frozen at the traced length would pass verification."""
    added = []
    for value in values:
        # the containers' own storage, never a subclass's methods (transformers' lazy
        # auto-mappings import models when asked for their values)
        inner = (dict.values(value) if isinstance(value, dict)
                 else list.__iter__(value) if isinstance(value, list) else ())
        for item in (value, *inner):
            if isinstance(item, _CONTAINERS) and id(item) not in _SHARED:
                _SHARED[id(item)] = item
                added.append(id(item))
    try:
        yield
    finally:
        for key in added:
            _SHARED.pop(key, None)


def model_copy(model: torch.nn.Module) -> torch.nn.Module:
    """``copy.deepcopy(model)``, also when a module attribute holds a tensor that is not a
    graph leaf (state a call with autograd on left behind, which deepcopy refuses): the copy
    holds a detached clone of it, the same values. Containers outside the model it is
    ``sharing`` stay shared, and so do the parameters of the model an export runs
    (``shared_weights``)."""
    memo: dict = {**_SHARED, **shared_parameters()}  # an export's parameters: shared_weights
    for module in model.modules():
        for value in list(vars(module).values()):
            _note_non_leaves(value, 0, memo)
    copied = copy.deepcopy(model, memo)
    _rebind_hooks(copied, memo)
    return copied


def _rebind_hooks(copied: torch.nn.Module, memo: dict) -> None:
    """Hooks that close over the model (``register_forward_hook(lambda m, i, o:
    setattr(self, "last", o))``): deepcopy keeps a function as it is, so the copy's hook
    wrote into the caller's model. Each such hook of the copy is remade with its closure
    cells holding the copies of what they held."""
    for module in copied.modules():
        for attribute, hooks in vars(module).items():
            if not (attribute.endswith("_hooks") and isinstance(hooks, dict)):
                continue
            for key, hook in list(hooks.items()):
                cells = getattr(hook, "__closure__", None)
                if not isinstance(hook, types.FunctionType) or not cells:
                    continue
                contents = []
                for cell in cells:
                    try:
                        contents.append(cell.cell_contents)
                    except ValueError:  # an empty cell
                        contents.append(_EMPTY)
                if not any(id(c) in memo for c in contents if c is not _EMPTY):
                    continue
                new_cells = tuple(types.CellType() if c is _EMPTY
                                  else types.CellType(memo.get(id(c), c)) for c in contents)
                remade = types.FunctionType(hook.__code__, hook.__globals__, hook.__name__,
                                            hook.__defaults__, new_cells)
                remade.__kwdefaults__ = hook.__kwdefaults__
                remade.__dict__.update(hook.__dict__)
                hooks[key] = remade


_EMPTY = object()


def _note_non_leaves(value, depth: int, memo: dict, keep_grad: bool = False) -> None:
    """``memo`` gets a detached clone of each tensor that is not a graph leaf, found in
    containers and plain objects' attributes (``self.cfg.history``) to depth 3; with
    ``keep_grad``, the clone requires grad where the tensor did."""
    if isinstance(value, torch.Tensor):
        if id(value) in memo:
            return
        if isinstance(value, FakeTensor):  # left in a list by a trace: no data to copy
            memo[id(value)] = value
        elif not value.is_leaf:
            memo[id(value)] = value.detach().clone().requires_grad_(
                keep_grad and value.requires_grad)
        return
    if depth >= 3 or isinstance(value, torch.nn.Module | type) or callable(value):
        return
    if isinstance(value, list | tuple | set | frozenset):
        items = list(value)
    elif isinstance(value, dict):
        items = list(dict.values(value))
    else:
        items = list(getattr(value, "__dict__", {}).values())
    for v in items[:1024]:
        _note_non_leaves(v, depth + 1, memo, keep_grad)


_KEPT: contextvars.ContextVar = contextvars.ContextVar("kept_examples", default=())


@contextlib.contextmanager
def examples_kept(examples) -> Iterator[None]:
    """Keep the values the examples' tensors hold now, for ``reset_examples``: stitch's
    analysis runs the forward on the same copies many times, and one that writes its input
    in place (``x.add_(1)``) would leave each run, and verification, a drifted input (an
    example given for one side of a branch ended up taking the other)."""
    import torch.utils._pytree as pytree

    saved = tuple((t, t.detach().clone()) for ex in examples
                  for t in pytree.tree_leaves((ex.args, ex.kwargs))
                  if isinstance(t, torch.Tensor) and not isinstance(t, FakeTensor))
    token = _KEPT.set(saved)
    try:
        yield
    finally:
        _KEPT.reset(token)


def reset_examples(example=None) -> None:
    """Write the kept values back into the examples' tensors (only ``example``'s, where
    given), in place (identities kept); a tensor whose shape or dtype the forward changed is
    left as it is."""
    kept = _KEPT.get()
    if example is not None:
        import torch.utils._pytree as pytree

        mine = {id(t) for t in pytree.tree_leaves((example.args, example.kwargs))}
        kept = [(t, v) for t, v in kept if id(t) in mine]
    with torch.no_grad():
        for tensor, value in kept:
            if tensor.shape == value.shape and tensor.dtype == value.dtype \
                    and not _overlapping(tensor):
                tensor.copy_(value)


def _overlapping(tensor: torch.Tensor) -> bool:
    """Elements sharing memory (``x.expand(...)``, a stride 0): no write in place can
    change such a tensor (torch refuses it, as ``copy_`` here would), so nothing drifted."""
    return torch._debug_has_internal_overlap(tensor) == 1


def inputs_copy(example):
    """A deep copy of an example, so that nothing stitch runs writes into the caller's
    inputs (a forward writing its input in place, or a dict it is given); a tensor that is
    not a graph leaf becomes a detached clone of it (same values and ``requires_grad``)."""
    memo: dict = {}
    for value in (*example.args, *example.kwargs.values()):
        _note_non_leaves(value, 0, memo, keep_grad=True)
    try:
        copied = copy.deepcopy(example, memo)
    except Exception:  # noqa: BLE001 - an input that holds an uncopyable handle: as given
        return example
    return _unaliased(copied)


def _unaliased(example):
    """The example with a tensor passed in two places (``model(x, x)``, ``[x, x]``) given
    as two tensors of the same values: torch.export lifts one input for both, and its
    program reads the first for both on every later call (``q - k`` gave 0 for
    ``(5, 2)``)."""
    import torch.utils._pytree as pytree

    seen: set[int] = set()
    twins: list[torch.Tensor] = []

    def own(value):
        if not isinstance(value, torch.Tensor):
            return value
        if id(value) not in seen:
            seen.add(id(value))
            return value
        twin = value.detach().clone()
        twins.append(twin)
        return twin.requires_grad_(value.requires_grad) if value.is_leaf else twin

    args, kwargs = pytree.tree_map(own, (tuple(example.args), example.kwargs))
    if not twins:
        return example
    return type(example)(tuple(args), kwargs)


def working_copy(model):
    """A deep copy to run, or the model itself (with ``restoring_state``) if it can't be copied."""
    if not isinstance(model, torch.nn.Module):
        return model, False
    try:
        return model_copy(model), True
    except Exception:  # noqa: BLE001 - some modules hold uncopyable handles
        return model, False


@contextlib.contextmanager
def restoring_state(model, keep_resized: bool = False) -> Iterator[None]:
    """Restore parameters, buffers (the same tensor objects, with their values) and
    ``training`` flags of ``model`` on exit. A forward that rebinds a buffer to another
    tensor gets the original object back, untouched; with ``keep_resized``, not one it
    rebinds to a tensor of another shape (a table rebuilt for a longer input), which the
    attributes the forward keeps beside it describe (``max_seq_len_cached``)."""
    if not isinstance(model, torch.nn.Module):
        yield
        return
    saved = []
    shared = shared_parameters()  # an export's shared parameters: it checks them itself
    for module in model.modules():
        for store in (module._parameters, module._buffers):
            for name, value in store.items():
                if isinstance(value, torch.Tensor):
                    kept = None if id(value) in shared else value.detach().clone()
                    saved.append((store, name, value, kept))
    modes = {name: m.training for name, m in model.named_modules()}
    try:
        yield
    finally:
        with torch.no_grad():
            for store, name, obj, value in saved:
                now = store.get(name)
                if keep_resized and isinstance(now, torch.Tensor) and now is not obj \
                        and now.shape != obj.shape:
                    continue
                store[name] = obj
                if value is not None:  # a kernel's own write (batch norm's running
                    obj.copy_(value)  # stats, a .data write) moves no version counter
        for name, m in model.named_modules():
            if name in modes:
                m.training = modes[name]


@contextlib.contextmanager
def preserved_rng() -> Iterator[None]:
    saved = rng_state()
    try:
        yield
    finally:
        set_rng_state(saved)


def rng_state() -> tuple:
    """Every random-number state a forward may draw from: torch's (CPU, each GPU), Python's
    ``random``, numpy's global one (BigBird's block plans)."""
    import sys

    numpy = sys.modules.get("numpy")
    return (torch.get_rng_state(), random.getstate(),
            torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            numpy.random.get_state() if numpy is not None else None)


def set_rng_state(saved: tuple) -> None:
    import sys

    cpu, py, cuda, np_state = saved
    torch.set_rng_state(cpu)
    random.setstate(py)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)
    numpy = sys.modules.get("numpy")
    if np_state is not None and numpy is not None:
        numpy.random.set_state(np_state)


@contextlib.contextmanager
def preserved_dynamo() -> Iterator[None]:
    """Fresh Dynamo caches for capture; config restored and caches reset afterwards."""
    config = torch._dynamo.config
    saved = config.get_config_copy()
    torch._dynamo.reset()
    try:
        yield
    finally:
        torch._dynamo.reset()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # reading deprecated keys warns
            for key, value in saved.items():
                if getattr(config, key) != value:
                    setattr(config, key, value)


@contextlib.contextmanager
def quiet_torch_logs() -> Iterator[None]:
    """Dynamo's graph-break warnings are what we report; don't also spill them on stderr."""
    levels = {}
    for name in _QUIET_LOGGERS:
        logger = logging.getLogger(name)
        levels[name] = logger.level
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


@dataclass
class Observed:
    """What a run printed and warned (kept, not dropped: the census reports it)."""

    stdout: str = ""
    warnings: list[str] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)


@contextlib.contextmanager
def observing_output() -> Iterator[Observed]:
    observed = Observed()
    buffer = io.StringIO()
    original_handle = logging.Logger.handle

    def handle(self, record):  # kept in the census instead of printed once per analysis run
        if not self.name.startswith("torch"):
            observed.logs.append(f"{record.levelname}:{record.name}:{record.getMessage()}")
            return None
        return original_handle(self, record)

    logging.Logger.handle = handle
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(buffer):
        warnings.simplefilter("always")
        try:
            yield observed
        finally:
            logging.Logger.handle = original_handle
            observed.stdout = buffer.getvalue()
            observed.warnings = [
                f"{w.category.__name__}: {w.message}" for w in caught
                if not _from_torch(w.filename)
            ]


def _from_torch(filename: str) -> bool:
    return "/torch/" in filename or "/torch_tensorrt/" in filename


@contextlib.contextmanager
def silenced_output() -> Iterator[Observed]:
    """For stitch's own analysis runs of the model: prints, warnings and log records are
    kept in the returned ``Observed`` instead of reaching the user's console."""
    with observing_output() as observed, contextlib.redirect_stderr(io.StringIO()):
        yield observed
