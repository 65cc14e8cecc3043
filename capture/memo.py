"""Attributes a forward creates on first use (memoized values): from its inputs, or not.

``if not hasattr(self, "long_inv_freq"): self.long_inv_freq = ...`` creates a value the
first time a path runs. Made from the configuration (LongRoPE's long factors), it is the
same whatever the input: the exported program may hold it as a constant. Made from the
input (``self.cached_scale = position_ids.float().mean()``), it is the *first* input's:
a program traced after the analysis ran would hold the examples' value for every caller.

``created`` finds the attributes the analysis runs created; ``from_inputs`` runs each
example on a fresh copy of the model under a torch function mode that marks every tensor
computed from an input, and names the created attributes that hold such a tensor.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator

import torch
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree

from .readings import MODULE_INTERNALS, SKIP, torch_internal


def plain_attributes(model: torch.nn.Module) -> Iterator[tuple[str, str, object]]:
    """(module path, name, value) of each plain attribute of the model's modules."""
    for path, module in model.named_modules():
        for name, value in vars(module).items():
            if name not in MODULE_INTERNALS and not torch_internal(module, name) \
                    and not isinstance(value, (torch.nn.Module, *SKIP)):
                yield path, name, value


def created(before: torch.nn.Module, after: torch.nn.Module) -> set[tuple[str, str]]:
    """Attributes ``after`` has that ``before`` (a copy taken before any run) lacked."""
    had = {(path, name) for path, name, _ in plain_attributes(before)}
    return {(path, name) for path, name, _ in plain_attributes(after)} - had


_ABSENT = object()


@contextlib.contextmanager
def attribute_writes(model: torch.nn.Module) -> Iterator[set[tuple[str, str]]]:
    """(module path, name) of each attribute of ``model``'s modules set while this holds:
    through ``nn.Module.__setattr__`` (``self.x = v``, ``setattr(self, "x", v)``), whether
    the value is new or the same object, and any other way (``self.__dict__["x"] = v``)
    where the value is another object afterwards. Only an attribute the forward sets can
    hold a value it set from its input; the others need no run on changed inputs. Not
    seen: a write into ``__dict__`` of the very object the attribute held."""
    paths = {id(m): path for path, m in model.named_modules()}
    before = {(path, name): value for path, m in model.named_modules()
              for name, value in vars(m).items()}
    written: set[tuple[str, str]] = set()
    original = torch.nn.Module.__setattr__

    def recording(self, name, value):
        path = paths.get(id(self))
        if path is not None:
            written.add((path, name))
        original(self, name, value)

    torch.nn.Module.__setattr__ = recording
    try:
        yield written
    finally:
        torch.nn.Module.__setattr__ = original
        written.update((path, name) for path, m in model.named_modules()
                       for name, value in vars(m).items()
                       if before.get((path, name), _ABSENT) is not value)


class _Derived(TorchFunctionMode):
    """Marks every tensor a torch function computes from a marked tensor."""

    def __init__(self, seeds: list[torch.Tensor]) -> None:
        super().__init__()
        self.marked = {id(t) for t in seeds}
        self.kept = list(seeds)  # alive while marked: ids stay theirs

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if any(isinstance(a, torch.Tensor) and id(a) in self.marked
               for a in pytree.tree_leaves((args, kwargs))):
            for value in pytree.tree_leaves(out):
                if isinstance(value, torch.Tensor):
                    self.marked.add(id(value))
                    self.kept.append(value)
        return out

    def holds_marked(self, value) -> bool:
        return any(isinstance(v, torch.Tensor) and id(v) in self.marked
                   for v in pytree.tree_leaves(value))


def from_inputs(fresh: torch.nn.Module, examples, names: set[tuple[str, str]],
                also: set[tuple[str, str]] = frozenset()) -> dict[tuple[str, str], int]:
    """The attributes in ``names`` an example creates holding a tensor computed from its
    inputs, or (those and the attributes in ``also``, which the model had) holding another
    plain value (a number, string or None) when example 0's inputs are changed (scaled, negated, integers plus one, bools
    flipped: a Python number read from them, ``setattr(self, "last", float(x.sum()))``,
    ``self.flag = bool(x.sum() > 0)`` where the examples all leave it False): (path, name)
    -> index of the first such example. A value that none of these changes is not found."""
    found = _marked(fresh, examples, names) if names else {}
    rest = (names | also) - set(found)
    if rest and examples:
        first = _created_values(fresh, examples[0], rest)
        for shift in (float_shift, _float_negated, _int_shift):
            other = _created_values(fresh, shifted(examples[0], shift), rest)
            for key in rest:
                if key in first and key in other and _differ(first[key], other[key]):
                    found.setdefault(key, 0)
    return found


def _created_values(fresh: torch.nn.Module, example, names) -> dict:
    model = copy.deepcopy(fresh)
    try:
        with torch.no_grad():
            model(*example.args, **example.kwargs)
    except Exception:  # noqa: BLE001 - that input is not the model's: no verdict
        return {}
    return {(p, n): v for p, n, v in plain_attributes(model) if (p, n) in names}


def float_shift(t: torch.Tensor) -> torch.Tensor:
    return t * 1.5 + 0.25 if t.is_floating_point() else t


def _float_negated(t: torch.Tensor) -> torch.Tensor:
    return -t - 0.25 if t.is_floating_point() else t  # a threshold on the sign flips


def _int_shift(t: torch.Tensor) -> torch.Tensor:
    if t.dtype == torch.bool:
        return ~t
    return t + 1 if not (t.is_floating_point() or t.is_complex()) else t


def shifted(example, shift):
    """The example with ``shift`` applied to a clone of each tensor."""
    args, kwargs = pytree.tree_map_only(torch.Tensor, lambda t: shift(t.clone()),
                                        (example.args, example.kwargs))
    return type(example)(tuple(args), kwargs)


_PLAIN = (int, float, complex, str, bytes, type(None))


def _differ(a, b) -> bool:
    """Whether two plain Python values (numbers, strings, None) differ, NaN alike; no
    verdict (False) for others: a tensor set from the input is found by its marking, and
    containers grow by appends and items, which stitch replays or compares on its own."""
    if isinstance(a, _PLAIN) and isinstance(b, _PLAIN):
        return a != b and not (a != a and b != b)
    return False


def _marked(fresh: torch.nn.Module, examples, names: set[tuple[str, str]]
            ) -> dict[tuple[str, str], int]:
    found: dict[tuple[str, str], int] = {}
    for index, example in enumerate(examples):
        model = copy.deepcopy(fresh)
        args, kwargs = pytree.tree_map_only(torch.Tensor, lambda t: t.clone(),
                                            (example.args, example.kwargs))
        mode = _Derived([t for t in pytree.tree_leaves((args, kwargs))
                         if isinstance(t, torch.Tensor)])
        try:
            with torch.no_grad(), mode:
                model(*args, **kwargs)
        except Exception:  # noqa: BLE001 - the census reports the model's own errors
            continue
        for path, name, value in plain_attributes(model):
            if (path, name) in names and (path, name) not in found \
                    and mode.holds_marked(value):
                found[(path, name)] = index
    return found
