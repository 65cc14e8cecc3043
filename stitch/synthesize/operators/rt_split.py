"""The rest of a function run once per structure of a value the data shapes.

A branch in a loop whose arms give one name two structures (a tensor or ``None``, tensors
of other ranks) carries it out as ``Alternatives`` (rt_union.py): a flag and both sides.
Code after the loop that uses the value needs one structure per step. ``split_rest`` takes
that code (the rest of the function, made a function of the names it reads by
``convert/split_rest.py``) and runs it as a ``torch.cond`` on the flag: each arm gets the
side its flag names, so a test ``extra is None`` is a Python truth there and every
operation sees one structure. Where the two arms' results agree in structure the result
is one value again; where they do not, it is carried on as ``Alternatives`` (to the
program's outputs, rebuilt after the graph, as before).

A loop leaves one ``Alternatives`` per iteration, folded as they are made
(``rt_union_fold.flatten``): the rest is traced once per structure, not once per iteration.

Run eagerly (the census, the reference runs), the value is one structure already: the rest
runs as it is, nothing else happens.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .rt_union import Alternatives
from .rt_union_fold import flatten
from .rt_values import fresh
from .site_marks import SPLIT_SUFFIX


def split_rest(site: str, rest: Callable, operands: tuple) -> Any:
    """``rest(*operands)``, as a cond on the flag of the first ``Alternatives`` among the
    operands (after ``flatten``), each arm with that operand's side."""
    operands = tuple(flatten(o) if isinstance(o, Alternatives) else o for o in operands)
    first = next((o for o in operands if isinstance(o, Alternatives)), None)
    if first is None:
        return rest(*operands)
    from .rt_control import cond

    at = tuple(i for i, o in enumerate(operands) if o is first)
    others = tuple(o for i, o in enumerate(operands) if i not in at)

    def arm(side: bool) -> Callable:
        def run(*ops):
            *kept, when_true, when_false = ops
            value = when_true if side else when_false
            kept = iter(kept)
            args = tuple(value if i in at else next(kept) for i in range(len(operands)))
            return fresh((split_rest(site, rest, args),), ops)

        run.__name__ = f"{'true' if side else 'false'}_rest"
        return run

    out, = cond(site + SPLIT_SUFFIX, first.flag, arm(True), arm(False),
                (*others, first.when_true, first.when_false), outputs=True)
    return out
