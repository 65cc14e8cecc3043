"""Warnings the program's output rebuild gives by itself are silenced there; the epilogue says
them, in the model's order.

Every runner of a program (the program's module, AOTInductor, ONNX Runtime, a server) goes
through ``running.run_with_epilogue``, where the graph's outputs become the model's output
structure by ``pytree.tree_unflatten``, which constructs the model's output classes again.
A class that warns in its constructor (diffusers' deprecated ``Transformer2DModelOutput``)
then warned on every call of the program besides the epilogue's replay of the model's own
warning: twice where the model warned once, and verification refused it.

So the rebuild is made once at export, on placeholder leaves, under a recorder; each
warning it gives that the epilogue replays unconditionally (a ``warn`` entry of the same
category and text) is recorded in ``Epilogue.rebuilt`` and silenced while a runner rebuilds
the outputs (``quiet_rebuild``): the replay says it, after the warnings the forward gave
before building its output, as the model did. A class whose constructor rejects the
placeholders records nothing, and a difference left is for verification to find.
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Iterator
from dataclasses import replace

import torch
import torch.utils._pytree as pytree

from .entries import Epilogue
from .replay import warning_category


def with_rebuilt_warnings(epilogue: Epilogue, out_spec: pytree.TreeSpec) -> Epilogue:
    """``epilogue`` with the warnings the output rebuild repeats (``rebuilt``)."""
    replayed = {(e.options.get("category"), _constant_text(e)) for e in epilogue.entries
                if e.kind == "warn" and e.guard is None}
    if not replayed:
        return epilogue
    said = tuple(dict.fromkeys(w for w in _rebuild_warnings(out_spec) if w in replayed))
    return replace(epilogue, rebuilt=said) if said else epilogue


def _rebuild_warnings(out_spec: pytree.TreeSpec) -> list[tuple[str, str]]:
    """(category, text) of each warning ``tree_unflatten`` gives building ``out_spec``."""
    leaves = [torch.zeros(()) for _ in range(out_spec.num_leaves)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            pytree.tree_unflatten(leaves, out_spec)
        except Exception:  # noqa: BLE001 - a constructor that checks its fields: no probe
            return []
    return [(f"{w.category.__module__}.{w.category.__qualname__}", str(w.message))
            for w in caught]


def _constant_text(entry) -> str | None:
    if entry.args and entry.args[0].kind == "const" and isinstance(entry.args[0].value, str):
        return entry.args[0].value
    return None


@contextlib.contextmanager
def quiet_rebuild(epilogue: Epilogue) -> Iterator[None]:
    """The warnings in ``epilogue.rebuilt`` silenced (nothing changed where there are none)."""
    if not epilogue.rebuilt:
        yield
        return
    with warnings.catch_warnings():
        for category, text in epilogue.rebuilt:
            warnings.filterwarnings("ignore", message=f"{re.escape(text)}\\Z",
                                    category=warning_category(category))
        yield

