"""The helpers scalar reads reach, rewritten with Python's number rules and added to a
round's rewrites (``number_helpers.py`` says which and why).

Each helper is rewritten once per round, with the union of the parameters reads reach
from every call found; the helpers it passes reads on to follow, ``MAX_DEPTH`` deep. A
helper stitch cannot rewrite (no source, a closure not yet bound) keeps the tensor's
rules inside, as before; the round's decisions name each helper either way.
"""

from __future__ import annotations

import types

from ..errors import StitchError
from ..plan import Action, Decision
from .context import RewriteContext
from .functions import Target, compile_function, parse_function
from .helper_effects import effect_helpers, writing_helpers
from .number_helpers import HelperCall, merge
from .number_ops import python_number_ops

Rewrites = dict[tuple[str, int], tuple[Target, types.FunctionType]]


def helper_rewrites(found: dict[tuple[str, int], HelperCall],
                    taken: set[tuple[str, int]], round_no: int = 1
                    ) -> tuple[Rewrites, list[Decision]]:
    """``(rewrites, decisions)``: the helpers in ``found`` (and those they pass reads to),
    except those in ``taken`` (rewritten already, for their own breaks); a decision for
    each, rewritten or left as written (with the reason)."""
    out: Rewrites = {}
    notes: dict[tuple[str, int], Decision] = {}  # the last rewrite of each helper
    done: dict[tuple[str, int], frozenset[str]] = {}
    queue = dict(found)
    while queue:
        key, call = queue.popitem()
        params = call.params | done.get(key, frozenset())
        if key in taken or (key in done and params == done[key]):
            continue
        target = call.target
        ctx = RewriteContext(filename=target.filename, qualname=target.qualname, sites={},
                             dependent_lines=set(), helpers=effect_helpers(target.base),
                             writers=writing_helpers(target.base))
        where, names = f"{target.filename}:{target.key[1]}", ", ".join(sorted(params))
        try:
            func = parse_function(target)
            python_number_ops(func, ctx, seeds=params, depth=call.depth + 1)
            compiled = compile_function(target, func)
        except (StitchError, SyntaxError) as e:
            notes[key] = Decision(Action.LEFT, where, target.qualname,
                                  f"a scalar read reaches it ({names}) and its operators "
                                  f"keep the tensor's rules: it could not be rewritten ({e})",
                                  round=round_no)
            done[key] = params
            continue
        notes[key] = Decision(Action.TENSOR_SCALAR, where, target.qualname,
                              f"a scalar read reaches it ({names}): its operators keep "
                              "Python's number rules", round=round_no)
        out[key] = (target, compiled)
        done[key] = params
        for inner in ctx.number_helpers.values():
            merge(queue, inner)
    return out, list(notes.values())
