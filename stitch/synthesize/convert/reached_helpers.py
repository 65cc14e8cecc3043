"""Functions a scalar read reaches at run time, found by running the rewritten model.

``number_helpers.py`` follows a read into the helpers it finds by name in the source. A
read also reaches functions no name resolves: ``super().__call__(..., n=n)`` runs the
module's ``forward`` (the instance's class, not the one the call is written in), a
submodule called out of a container, a function passed as a value, ``**kwargs``. There
the read arrives as the 0-d tensor it is in the program, and code that takes it as a
number fails: ``x.size()[:d] + (n,)`` makes a ``torch.Size`` of a fake tensor while the
model is traced (torch_geometric's ``scatter`` under its aggregations).

So when a round's rewrite fails to run, the rewritten model runs once more, eagerly on
example 0, with a profile hook that notes each Python function of user code entered with
a read (a marked 0-d tensor) among its arguments, directly or as an item of ``*args``,
``**kwargs`` or a tuple or list argument. Each such function is rewritten as a helper is
(``helper_rewrites.py``), the parameters that held a read seeded as reads, and the round
is tried again; a function rewritten for a break of its own has those parameters seeded
too (a read a break there tests: ``dim_size or 0``). The same run is made where a round
leaves a break no rewrite takes. Which function ran is what the run shows, so every spelling of the call
is followed the same way.

Not followed (as in ``number_helpers.py``): functions of torch, the standard library,
stitch, numpy or scipy; nested functions and lambdas; generators and coroutines;
functions found on neither the ``self`` argument's class nor the module's globals. A
function only a branch example 0 does not take reaches is not seen.
"""

from __future__ import annotations

import os
import sys
import types
from typing import Any

import torch

from capture.inputs import Example
from capture.isolation import model_copy, preserved_rng, silenced_output
from capture.source import is_user_file
from capture.user_frames import user_line

from ...epilogue.entries import NUMBER_KIND
from .functions import installed
from .number_helpers import HelperCall, helper_target, merge

MAX_ITEMS = 16  # items of a tuple/list/dict argument looked into for a read


def reached_helpers(work: Any, candidate: dict, example: Example,
                    known: dict[tuple[str, int], HelperCall],
                    failed: BaseException | None = None) -> bool:
    """Add to ``known`` the functions a read reaches when ``candidate`` runs on
    ``example`` (its parameters that held one merged into what was known); True when
    that found a function or a parameter not known before. The run's own error, if any,
    is the caller's to report: what ran before it is kept.

    ``failed``: the error that made the caller look (a trace of the rewrite that stopped).
    A read taken as a number fails in the function it reached, or in one it handed the
    read on to (reached too), so a function found here explains ``failed`` only where
    the innermost user line of ``failed`` lies in it: elsewhere (a size guard in code no
    read reached) True would only make the caller trace again to the same error, and
    False is returned, the functions still added to ``known``."""
    if not candidate:  # nothing rewritten: no read is marked, no run shows one
        return False
    seen: dict[types.CodeType, tuple[set[str], list]] = {}

    def hook(frame, event, _arg):
        if event == "call" and is_user_file(frame.f_code.co_filename):
            params = _read_params(frame)
            if params:
                code = frame.f_code
                found = seen.setdefault(code, (set(), []))
                found[0].update(params)
                if not found[1]:
                    found[1].extend(_places(code, frame))

    before = {key: call.params for key, call in known.items()}
    try:
        with installed(candidate), torch.no_grad(), silenced_output(), preserved_rng():
            model = model_copy(work)
            previous = sys.getprofile()
            sys.setprofile(hook)
            try:
                model(*example.args, **example.kwargs)
            finally:
                sys.setprofile(previous)
    except Exception:  # noqa: BLE001 - the round reports the failure it had
        pass
    rewritten = {fn.__code__: target for target, fn in candidate.values()}
    codes: dict[tuple[str, int], types.CodeType] = {}
    for code, (params, places) in seen.items():
        # rewritten already (for a break of its own, or as a helper): its parameters that
        # held reads are seeded there, as a helper's are
        target = rewritten.get(code) or _target_of(code, places)
        if target is not None:
            merge(known, HelperCall(target, frozenset(params)))
            codes[target.key] = code
    grown = [key for key, call in known.items() if before.get(key) != call.params]
    where = user_line(failed) if failed is not None else None
    if grown and where is not None:
        filename, _, line = where.rpartition(":")
        return any(_holds_line(codes[key], filename, int(line)) for key in grown)
    return bool(grown)


def _holds_line(code: types.CodeType, filename: str, line: int) -> bool:
    """Whether ``filename:line`` is in the function ``code`` runs (its nested functions
    included: a cond's arm the rewrite made inside it)."""
    if os.path.abspath(code.co_filename) != os.path.abspath(filename):
        return False
    lines = [n for _, _, n in code.co_lines() if n is not None]
    nested = [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return (bool(lines) and min(lines) <= line <= max(lines)) or any(
        _holds_line(c, filename, line) for c in nested)


def _read_params(frame) -> set[str]:
    code = frame.f_code
    count = code.co_argcount + code.co_kwonlyargcount
    count += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)  # *args, **kwargs
    values = frame.f_locals
    return {name for name in code.co_varnames[:count] if _holds_read(values.get(name))}


def _holds_read(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return getattr(value, NUMBER_KIND, None) is not None
    if isinstance(value, dict):
        value = list(value.values())
    if type(value) in (tuple, list):
        return any(isinstance(v, torch.Tensor) and getattr(v, NUMBER_KIND, None) is not None
                   for v in value[:MAX_ITEMS])
    return False


def _places(code: types.CodeType, frame) -> list:
    """Where the function whose code runs in ``frame`` may be bound: the class of its first
    argument (a method: ``self``) and that class's bases, then its module's globals."""
    places = []
    if code.co_argcount:
        first = frame.f_locals.get(code.co_varnames[0])
        owner = first if isinstance(first, type) else type(first)
        places += [cls for cls in owner.__mro__ if code.co_name in vars(cls)]
    module = sys.modules.get(frame.f_globals.get("__name__", ""))
    if module is not None:
        places.append(module)
    return places


def _target_of(code: types.CodeType, places: list):
    """The function object whose code ran, as a helper target (``number_helpers``' rules),
    or None where no place binds it under its own name."""
    for owner in places:
        raw = vars(owner).get(code.co_name)
        base = raw.__func__ if isinstance(raw, staticmethod) else raw
        if getattr(base, "__code__", None) is code:
            return helper_target(base, raw, owner, code.co_name)
    return None
