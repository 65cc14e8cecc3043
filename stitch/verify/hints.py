"""What a verification refusal tells the user to change: the paragraph after its finding."""

from __future__ import annotations

import inspect
import re

import torch
import torch.utils._pytree as pytree

from capture import torch_messages as tm
from capture.locate import locate_in_class

WHY = "\nWhy: "  # starts the paragraph a refusal's message gives its cause in


def guard_hint(error: BaseException | None) -> str:
    """Why a program's own input guard failed, and what to change."""
    if not (isinstance(error, AssertionError) and tm.matches(tm.GUARD_FAILED, str(error))):
        return ""
    return (f"{WHY}torch.export specialised the program to what the examples it traced "
            "had there (a size the model tests, or a non-tensor input it reads), and this "
            "input has another. What you can do: give examples that differ there (a size "
            "they differ in is exported dynamic; torch.export fixes one traced at 0 or 1, so "
            "let one example be at least 2 in every dimension that varies), pass "
            "dynamic_shapes, or export one program per such value.")


def tolerance_hint(actual, expected) -> str:
    """For a floating-point output that differs a little (same shape, a few elements): how
    to compare more loosely, where the difference is rounding (torch.export's decompositions
    can order a sum or an interpolation otherwise than eager does)."""
    if not (isinstance(actual, torch.Tensor) and actual.shape == expected.shape
            and expected.is_floating_point() and actual.is_floating_point()):
        return ""
    diff = (actual.double() - expected.double()).abs()
    largest = diff.nan_to_num(0.0).max().item() if diff.numel() else 0.0
    scale = expected.double().abs().nan_to_num(0.0).max().item() if diff.numel() else 0.0
    if not 0.0 < largest <= 1e-3 * max(scale, 1.0):
        return ""
    return (f"\nWhat you can do: if a difference of {largest:.3g} is rounding (the program "
            "computes in another order), compare more loosely: stitch.Settings(atol="
            f"{largest * 10:.1g}) (or rtol); otherwise the program is wrong here: please "
            "report it with this model")


def structure_hint(first, here) -> str:
    """Where the program raised its input guard on an input whose output the model gives in
    another structure than on the first example (``first``, ``here``: the model's runs; a
    list with one item per image: kornia's DISK): one program has one output structure."""
    if first is None or first.error is not None or here.error is not None:
        return ""
    spec_first = pytree.tree_structure(first.result)
    spec_here = pytree.tree_structure(here.result)
    if spec_first == spec_here:
        return ""
    return (f"\nThe model's output has another structure on this input than on the first "
            f"example ({spec_here.num_leaves} leaves against {spec_first.num_leaves}); a "
            "torch.export program returns one structure, so it serves only inputs giving the "
            "traced one. What you can do: export one program per output structure (per value "
            "of the size it follows), or return a tensor where the model returns a list with "
            "an item per element.")


def reshaped_buffer_hint(model, buffers: tuple[dict, dict] | None) -> str:
    """Why a buffer the program leaves differs: the forward gave it a tensor of another
    shape in a way stitch cannot take as a cache (``register_buffer`` of the name again),
    and torch.export writes it back in place, which cannot change its shape."""
    if not buffers or not isinstance(model, torch.nn.Module):
        return ""
    ours, theirs = buffers
    name = next((n for n, v in ours.items() if n in theirs and v.shape != theirs[n].shape),
                None)
    if name is None:
        return ""
    owner, _, attr = name.rpartition(".")
    return (f"{WHY}the forward gives buffer {name} a tensor of another shape (likely at "
            f"{_registered_at(model.get_submodule(owner), attr)}): the model leaves it of shape "
            f"{tuple(ours[name].shape)}, the program of shape {tuple(theirs[name].shape)}. "
            "torch.export writes a buffer the forward sets back into it in place, which "
            "cannot change its shape. What you can do: assign it (`self."
            f"{attr} = ...`) rather than registering it again, which stitch takes as a "
            "cache (recomputed in the graph, set after each call); or, where its shape does "
            "not change from call to call, call the model once before exporting.")


def _registered_at(owner: torch.nn.Module, attr: str) -> str:
    """file:line of the last ``register_buffer(attr, ...)`` outside ``__init__`` in
    ``owner``'s class, else where the class assigns it."""
    try:
        file = inspect.getsourcefile(type(owner))
        lines, start = inspect.getsourcelines(type(owner))
    except (TypeError, OSError):
        return locate_in_class(owner, attr)
    call = re.compile(rf"register_buffer\(\s*['\"]{re.escape(attr)}['\"]")
    method, found = "", []
    for i, text in enumerate(lines):
        method = (re.match(r"\s+def (\w+)", text) or [None, method])[1]
        if method != "__init__" and call.search(text):
            found.append(start + i)
    return f"{file}:{found[-1]}" if found else locate_in_class(owner, attr)
