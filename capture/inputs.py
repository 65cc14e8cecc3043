"""Checks on what the user handed us: a model, example inputs that fit it."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils._pytree as pytree

from .errors import InputError, describe

ALLOWED_LEAVES = (torch.Tensor, bool, int, float, str, type(None))


@dataclass(frozen=True)
class Example:
    args: tuple
    kwargs: dict
    # the user's numbering (0: args/kwargs, i: examples[i-1]) where the examples were
    # reordered for tracing; None where the position in the list is the number
    number: int | None = None

    def name(self, position: int) -> str:
        return f"example {position if self.number is None else self.number}"


def forward_of(model: Any) -> Callable:
    """The Python function that runs when ``model(...)`` is called."""
    if isinstance(model, torch.nn.Module):
        return model.forward
    if isinstance(model, type) or not callable(model):
        raise InputError(
            f"expected a torch.nn.Module or a callable, found {describe(model)}; "
            "pass the model instance (not its class)"
        )
    return model


def check_model(model: Any) -> Callable:
    forward = forward_of(model)
    target = inspect.unwrap(getattr(forward, "__func__", forward))
    name = getattr(target, "__qualname__", type(model).__name__)
    if inspect.isgeneratorfunction(target) or inspect.isasyncgenfunction(target):
        raise InputError(f"{name} is a generator; stitch needs a forward that returns its "
                         "outputs. Collect the yielded values into a tuple and return it.")
    if inspect.iscoroutinefunction(target):
        raise InputError(f"{name} is async; torch.compile and torch.export trace synchronous "
                         "code only. Make forward a plain function.")
    return forward


def normalize(model: Any, args: Any, kwargs: Any, examples: Any) -> list[Example]:
    """All example inputs as ``Example``s, the first being ``(args, kwargs)``."""
    forward = check_model(model)
    first = _example(args, kwargs, "args")
    out = [first]
    if examples is not None:
        if not isinstance(examples, list | tuple):
            raise InputError(f"examples must be a list of (args, kwargs) pairs, found "
                             f"{describe(examples)}")
        for i, ex in enumerate(examples):
            if not (isinstance(ex, tuple | list) and len(ex) == 2):
                raise InputError(
                    f"examples[{i}] must be an (args, kwargs) pair, found {describe(ex)}; "
                    "e.g. examples=[((x2,), {})]"
                )
            out.append(_example(ex[0], ex[1], f"examples[{i}]"))
    signature = _signature(forward)
    for i, ex in enumerate(out):
        where = "args/kwargs" if i == 0 else f"examples[{i - 1}]"
        if signature is not None:
            try:
                signature.bind(*ex.args, **ex.kwargs)
            except TypeError as e:
                raise InputError(
                    f"{where} do not fit {_name(forward)}{signature}: {e}. "
                    "Pass positional inputs as a tuple and keyword inputs as a dict."
                ) from None
        _check_leaves(ex, where)
    return _same_keywords(out, signature)


def _same_keywords(examples: list[Example], signature: inspect.Signature | None
                   ) -> list[Example]:
    """Examples that pass different optional inputs (one gives ``scale=0.5``, another leaves
    it to its default) as calls with one set of inputs: each example gets, by keyword, the
    default of every parameter another example passes and it does not. The program then
    takes the union of the inputs, as the model does."""
    if signature is None or len(examples) < 2:
        return examples
    bound = [signature.bind(*ex.args, **ex.kwargs).arguments for ex in examples]
    passed = {name for b in bound for name in b}
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    out = []
    for ex, names in zip(examples, bound, strict=True):
        missing = {name: p.default for name, p in signature.parameters.items()
                   if name in passed and name not in names and p.kind in keyword
                   and p.default is not inspect.Parameter.empty}
        out.append(Example(ex.args, {**ex.kwargs, **missing}) if missing else ex)
    return out


def _example(args: Any, kwargs: Any, where: str) -> Example:
    if isinstance(args, torch.Tensor):
        args = (args,)
    if isinstance(args, list):
        args = tuple(args)
    if not isinstance(args, tuple):
        raise InputError(f"{where} must be a tuple of positional inputs, found {describe(args)}; "
                         "e.g. (x,) for one input")
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        raise InputError(f"kwargs for {where} must be a dict of str to inputs, found "
                         f"{describe(kwargs)}")
    return Example(args, dict(kwargs))


def _check_leaves(ex: Example, where: str) -> None:
    leaves, _ = pytree.tree_flatten((ex.args, ex.kwargs))
    for leaf in leaves:
        if not isinstance(leaf, ALLOWED_LEAVES):
            raise InputError(
                f"{where} contain {describe(leaf)}; inputs must be tensors, or tuples, lists "
                "and dicts of tensors (plain bool/int/float/str/None constants are allowed). "
                "Convert it to a tensor or bind it into the model."
            )


def _signature(fn: Callable) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def _name(fn: Callable) -> str:
    return getattr(fn, "__qualname__", repr(fn))
