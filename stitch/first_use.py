"""Set-up a model does on its first call only, said in a state refusal.

Some forwards set themselves up on first use: RWKV divides its weights in place and sets
``layers_are_rescaled``; RecurrentGemma makes its recurrent state from None. Built fresh and
never called, such a model changes Python state on the first call that no later call
changes, and stitch refuses it (the program would never do that set-up). stitch never calls
the user's model itself, so the fix is the user's: call it once, then export. This module
finds that case — on a copy, two calls: the first changes state, the second nothing — so the
refusal can say so, naming what the first call set up.
"""

from __future__ import annotations

import torch

from capture import memo
from capture.inputs import Example
from capture.isolation import model_copy, preserved_rng, silenced_output

from .errors import StitchError
from .verify.state import attribute_readings, changed_attributes


def _snapshot(model: torch.nn.Module) -> tuple[dict, dict]:
    """Plain attributes by reading; parameters and buffers by identity and version counter
    (an in-place write bumps it): no copies of the weights on this refusal path."""
    return (attribute_readings(model),
            {k: (id(v), v._version) for k, v in model.state_dict(keep_vars=True).items()})


def _changed(before: tuple[dict, dict], after: tuple[dict, dict]) -> list[str]:
    attrs = changed_attributes(before[0], after[0], ())
    old, new = before[1], after[1]
    tensors = [k for k in {*old, *new} if old.get(k) != new.get(k)]
    return sorted({*attrs, *tensors})


def first_use_changes(model: torch.nn.Module, examples: list[Example]) -> list[str]:
    """What the forward changes on a first call and later calls do not change (attribute,
    parameter and buffer paths): a second call on the same input, and a third on another
    (example 1, or example 0 with its floating-point tensors changed: a value set from the
    input on every call, ``setattr(self, "last", x.sum())``, is no set-up). [] when the
    first call changes nothing, a later call changes state too, or the model fails. Runs on
    a copy."""
    example = examples[0]
    other = examples[1] if len(examples) > 1 else memo.shifted(example, memo.float_shift)
    try:
        probe = model_copy(model)
        with preserved_rng(), torch.no_grad(), silenced_output():
            fresh = _snapshot(probe)
            probe(*example.args, **example.kwargs)
            once = _snapshot(probe)
            probe(*example.args, **example.kwargs)
            twice = _snapshot(probe)
            try:
                probe(*other.args, **other.kwargs)
            except Exception:  # noqa: BLE001 - the model refuses that input: not asked
                pass
            thrice = _snapshot(probe)
    except Exception:  # noqa: BLE001 - a hint only: the refusal stands as it is
        return []
    first = _changed(fresh, once)
    return first if first and not _changed(once, twice) and not _changed(twice, thrice) \
        else []


def with_first_use_hint(refusal: StitchError, model: torch.nn.Module,
                        examples: list[Example]) -> StitchError:
    """``refusal``, saying how to export when the model sets itself up on first use (as the
    cause when the refusal names what the set-up changes, as a possible one otherwise)."""
    text = str(refusal)
    names = first_use_changes(model, examples)
    if not names:
        return refusal
    shown = ", ".join(repr(n) for n in names[:6]) + (
        f" and {len(names) - 6} more" if len(names) > 6 else "")
    named = any(n.rpartition(".")[2] in text for n in names)
    refusal.args = (f"{text}\n{'This is' if named else 'The model also does'} set-up on first "
                    f"use: on a copy of the model, a first call changed {shown} and later "
                    "calls, on the same input and on another, changed nothing. stitch never calls your model "
                    "itself; "
                    f"{'' if named else 'if that is the difference, '}call it once before "
                    "stitch.export (`with torch.no_grad(): model(*args)`), then export: the "
                    "program is then the model as every later call runs it.",) \
        + refusal.args[1:]
    return refusal
