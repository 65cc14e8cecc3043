"""The helpers scalar reads reach, rewritten with Python's number rules and added to a
round's rewrites (``number_helpers.py`` says which and why).

Each helper is rewritten once per round, with the union of the parameters reads reach
from every call found; the helpers it passes reads on to follow, ``MAX_DEPTH`` deep. A
helper stitch cannot rewrite (no source, a closure not yet bound) keeps the tensor's
rules inside, as before; the round's decisions name each helper either way. The callers
of a function that returns a read come here too (``returned_reads.py``), with no
parameters: their reads come back from that call.
"""

from __future__ import annotations

import types

from capture.source import module_of_file

from ...errors import StitchError
from ...plan import Action, Decision
from ..analysis.context import RewriteContext
from .functions import Target, compile_function, parse_function
from .helper_effects import effect_helpers, writing_helpers
from .number_helpers import HelperCall, calls_to, merge
from .number_ops import python_number_ops

Rewrites = dict[tuple[str, int], tuple[Target, types.FunctionType]]


def helper_rewrites(found: dict[tuple[str, int], HelperCall],
                    taken: set[tuple[str, int]], round_no: int = 1,
                    returners: frozenset[tuple[str, int]] = frozenset()
                    ) -> tuple[Rewrites, list[Decision], set[tuple[str, int]]]:
    """``(rewrites, decisions, returning)``: the helpers in ``found`` (and those they pass
    reads to), except those in ``taken`` (rewritten already, for their own breaks); a
    decision for each, rewritten or left as written (with the reason); the keys of those
    that return a read. ``returners``: functions whose calls are reads
    (``returned_reads.py``)."""
    out: Rewrites = {}
    notes: dict[tuple[str, int], Decision] = {}  # the last rewrite of each helper
    done: dict[tuple[str, int], tuple[frozenset[str], frozenset[int]]] = {}
    returning: set[tuple[str, int]] = set()
    queue = dict(found)
    while queue:
        key, call = queue.popitem()
        before = done.get(key, (frozenset(), frozenset()))
        params, lines = call.params | before[0], call.lines | before[1]
        if key in taken or (key in done and (params, lines) == done[key]):
            continue
        target = call.target
        ctx = RewriteContext(filename=target.filename, qualname=target.qualname, sites={},
                             dependent_lines=set(), helpers=effect_helpers(target.base),
                             writers=writing_helpers(target.base), read_returners=returners,
                             read_call_lines=lines, module_globals=target.base.__globals__,
                             freevars=frozenset(target.base.__code__.co_freevars))
        where = f"{target.filename}:{target.key[1]}"
        reaches = f"a scalar read reaches it ({', '.join(sorted(params))})" if params else \
            f"it calls {call.via}, which returns a scalar read"
        try:
            func = parse_function(target)
            if not params and not calls_to(func, module_of_file(target.filename),
                                           target.qualname, returners, lines):
                raise StitchError(f"its call of {call.via} is not one stitch finds by name "
                                  "(a module function, a user module's function or a "
                                  "method of the model's class, undecorated) or makes "
                                  "through `self` or a local name")
            python_number_ops(func, ctx, seeds=params, depth=call.depth + 1)
            compiled = compile_function(target, func)
        except (StitchError, SyntaxError) as e:
            notes[key] = Decision(Action.LEFT, where, target.qualname,
                                  f"{reaches}, and its operators keep the tensor's rules: "
                                  f"it could not be rewritten ({e})",
                                  round=round_no)
            done[key] = params, lines
            continue
        notes[key] = Decision(Action.TENSOR_SCALAR, where, target.qualname,
                              f"{reaches}: its operators keep Python's number rules",
                              round=round_no)
        out[key] = (target, compiled)
        done[key] = params, lines
        if ctx.returns_read:
            returning.add(key)
        for inner in ctx.number_helpers.values():
            merge(queue, inner)
    return out, list(notes.values()), returning
