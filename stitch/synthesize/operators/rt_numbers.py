"""Python numbers a branch changes or returns, carried through ``torch.cond``.

torch.cond (2.14) takes tensors only as operands, and returns tensors and ints (an int
result becomes an unbacked symbol); a Python bool or float is neither. So a branch that
changes a count or a scale, or returns through a continuation a tuple holding them::

    n, scale = 0, 1.0
    if h.sum() > 0:
        n += 2
        scale = scale * 0.5

passes its non-tensor operands to the arms through their closure (each arm sees the very
value, concrete or symbolic) and returns numbers as 0-d tensors (bool, int64 or float64),
read back with ``.item()`` after the cond (a symbolic number in the graph): every number
that was an operand, every float, every symbolic number. torch.cond's own int outputs are
not enough: under torch.compile a branch may return only *constant* ints, and a cond nested
in a branch returns symbolic ones. A constant int first assigned in the branch stays
torch.cond's own output, which knows its bounds. Which output leaves
are numbers is what the eager runs of the rewritten model saw (the census runs it eagerly
before anything is traced): tracing must not record it, as a branch traced by torch.cond
may not change state outside itself. Arms giving numbers of different kinds (an int and a
float) fail to trace; the branch is then refused with torch.cond's message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch
import torch.utils._pytree as pytree

from ...epilogue.entries import NUMBER_KIND
from .rt_lift import available as lifting_available
from .rt_symbolic import is_constant, is_unbacked
from .rt_values import number_tensor

NUMBER = (bool, int, float, torch.SymBool, torch.SymInt, torch.SymFloat)
# per branch (its true arm, by file, line and name: torch.compile guards on the key, and
# cannot name a code object): the output leaves that were numbers when it ran eagerly
NUMBER_LEAVES: dict[str, frozenset[int]] = {}
# per branch, likewise: the output leaves that were scalar reads (kept as marked 0-d
# tensors) when it ran eagerly, by kind ("" where a run gave anything else there)
READ_KINDS: dict[str, dict[int, str]] = {}


def _device(tensors: tuple):
    """The device of an arm's first tensor operand (a read beside a constant lives there:
    torch.cond wants both arms' outputs on one device), else None (the default)."""
    for leaf in pytree.tree_leaves(tensors):
        if isinstance(leaf, torch.Tensor):
            return leaf.device
    return None


def _key(fn: Callable) -> str | None:
    code = getattr(fn, "__code__", None)
    return None if code is None else f"{code.co_filename}:{code.co_firstlineno}:{code.co_name}"


def _site_key(fn: Callable, site: str | None) -> str | None:
    """The branch's site in its function: the copies of one source `if` that continuations
    put in several arms share it (``file:Class.forward:S3``)."""
    code = getattr(fn, "__code__", None)
    if code is None or not site:
        return None
    # the code object's own qualname: Dynamo 2.11 breaks the graph on a nested function's
    # __qualname__ (seen on the lent GPU), as it does not on the code's attributes
    return f"{code.co_filename}:{code.co_qualname.split('.<locals>.')[0]}:{site}"


def branch_keys(fn: Callable, site: str | None) -> tuple[str | None, str | None]:
    """The keys eager runs note a branch under: this copy, and its source site."""
    return _key(fn), _site_key(fn, site)


def _all_tensors(value) -> bool:
    return all(isinstance(v, torch.Tensor) for v in pytree.tree_leaves(value))


def seen_eagerly(true_fn: Callable, outputs, site: str | None = None) -> None:
    """Note which leaves of a branch's outputs are Python numbers (an eager run), for this
    copy of the branch and for its site; and which are scalar reads (``READ_KINDS``)."""
    leaves = pytree.tree_leaves(outputs)
    numbers = frozenset(i for i, v in enumerate(leaves) if isinstance(v, NUMBER))
    reads = {i: getattr(v, NUMBER_KIND, None) or "" for i, v in enumerate(leaves)
             if isinstance(v, torch.Tensor)}
    for key in (_key(true_fn), _site_key(true_fn, site)):
        if key is not None and (numbers or key in NUMBER_LEAVES):
            NUMBER_LEAVES[key] = NUMBER_LEAVES.get(key, frozenset()) | numbers
        if key is not None and (any(reads.values()) or key in READ_KINDS):
            known = READ_KINDS.setdefault(key, {})
            for i, kind in reads.items():  # a leaf seen as two kinds, or as a tensor: ""
                known[i] = kind if known.get(i, kind) == kind else ""


def mark_reads(true_fn: Callable, outputs: tuple, site: str | None = None) -> tuple:
    """The traced cond's outputs, each leaf every eager run of the branch gave as a scalar
    read (a 0-d tensor marked with its Python kind, ``rt_values.scalar``) marked so too:
    torch.cond returns new tensors, and an operator on the read after the branch keeps
    Python's rules by that mark (``rt_arith.py``). Not under Dynamo (nothing there needs
    it)."""
    kinds = READ_KINDS.get(_key(true_fn)) or READ_KINDS.get(_site_key(true_fn, site))
    if not kinds or torch.compiler.is_dynamo_compiling():
        return outputs
    for i, value in enumerate(pytree.tree_leaves(outputs)):
        if kinds.get(i) and isinstance(value, torch.Tensor) and value.dim() == 0:
            try:
                setattr(value, NUMBER_KIND, kinds[i])
            except (AttributeError, RuntimeError):
                pass
    return outputs


def split_python_values(true_fn: Callable, false_fn: Callable, operands: tuple,
                        numbers: frozenset[int] | None = None, ins: tuple = (),
                        outs: tuple = (), every: bool = False, site: str | None = None,
                        reads: int = 0, lift: bool = True):
    """``(true_fn, false_fn, tensor_operands, numbers)``: the arms taking the tensor operands
    only (the others put back in their places from the closure) and returning each number
    leaf the eager runs saw as a 0-d tensor; ``numbers``, those leaves, for ``read_back``.
    Unchanged when there is nothing to carry. ``numbers``: known already (a branch whose
    arms were probed), else what the eager runs saw, and the outputs named (``outs``) like
    an operand (``ins``) that is a number: a branch no example took never ran eagerly.
    ``every``: every number leaf travels as a tensor, a constant int too (the arms were
    probed with nested branches run as Python, so which leaves will be symbolic when
    traced, an inner cond's int output, is not known: the arms must agree on the kind);
    also for a branch whose arms hold another (Dynamo shows an arm a symbolic int as a
    plain int: the arm cannot tell). ``site``: where this copy of the branch never ran
    eagerly (a continuation copied it into an arm no example took), what another copy of
    the same source `if` gave. ``reads``: the last operands are names the arms only read
    (passed so that a symbolic number among them, an earlier cond's output, goes in as a 0-d
    tensor: through the closure torch.cond cannot lift it); the others, tensors too, reach
    the arms as before, through the closure. ``lift``: False carries symbolic ints as 0-d
    tensors too (``rt_control._carried``'s retry)."""
    if numbers is None:
        numbers = NUMBER_LEAVES.get(_key(true_fn))
        if numbers is None:
            numbers = NUMBER_LEAVES.get(_site_key(true_fn, site), frozenset())
    read_only = set(range(len(operands) - reads, len(operands)))
    fixed = {i: o for i, o in enumerate(operands) if not _all_tensors(o) or i in read_only}
    reads_at = READ_KINDS.get(_key(true_fn)) or READ_KINDS.get(_site_key(true_fn, site)) or {}
    if not fixed and not numbers:
        # no number to carry that an eager run saw; a branch no example ran may still
        # return a bool (``return True`` in a helper), which torch.cond cannot return
        return (_flagging(true_fn, reads_at), _flagging(false_fn, reads_at), operands,
                numbers)
    # a symbolic number (an earlier cond's output, read back) cannot always reach an arm
    # through its closure (torch.cond takes no SymFloat, nor an unbacked SymInt while
    # exporting): it goes in as a 0-d tensor, read in the arm. Under Dynamo a SymFloat
    # looks like a float: Dynamo itself says which floats are not constants. A constant
    # float stays one (an op that takes only a Python float, torchvision's NMS threshold)
    floats = ({i for i, o in fixed.items() if isinstance(o, float) and not isinstance(o, bool)}
              if torch.compiler.is_dynamo_compiling() else set())
    # a bool is the same: an earlier cond's bool output (a flag a branch set) is a SymBool,
    # which torch.cond cannot lift either
    bools = ({i for i, o in fixed.items() if isinstance(o, bool)}
             if torch.compiler.is_dynamo_compiling() else set())
    # and an int read from data (an earlier cond's int output: a loop index it carried)
    reads_ = ({i for i, o in fixed.items() if isinstance(o, int) and not isinstance(o, bool)
               and is_unbacked(o)} if torch.compiler.is_dynamo_compiling() else set())
    symbolic = {i for i in floats | bools if not is_constant(operands[i])} | reads_ \
        if torch.compiler.is_dynamo_compiling() else {
        i for i, o in fixed.items() if isinstance(o, torch.SymInt | torch.SymFloat | torch.SymBool)}
    # an int size reaches the arms as itself where torch.cond can lift it (rt_lift.py): the
    # arm's guards on it are then decided by the predicate, a test of that very size
    lifted = {i for i in symbolic if isinstance(operands[i], torch.SymInt)} \
        if lift and lifting_available() and not torch.compiler.is_dynamo_compiling() else set()
    symbolic -= lifted
    kept = [i for i in range(len(operands)) if i not in fixed or i in symbolic]
    # an arm may hand a symbolic operand back (``return h, n``) where the other gives a
    # constant: every number then travels as a tensor, so the arms agree on the kind; so
    # too where a float is an operand at all (an arm returning it would return a Python
    # float, which no cond returns)
    every = every or bool(symbolic) or bool(floats) or bool(lifted) or any(
        # sizes inside a list operand (``shapes = [[h, w]]`` where the other arm keeps a
        # constant list): torch.cond returns no symbolic int, so they travel as tensors,
        # and the other arm's ints too (each arm decides alone)
        isinstance(leaf, torch.SymInt | torch.SymFloat | torch.SymBool)
        for o in fixed.values() if isinstance(o, list | tuple | dict)
        for leaf in pytree.tree_leaves(o))
    named = [outs.index(ins[i]) for i, o in fixed.items()
             if isinstance(o, NUMBER) and i < len(ins) and ins[i] in outs]
    always = _leaf_indices(operands, ins, outs, named) if named else frozenset()
    numbers = numbers | always

    def carried(i: int, v) -> bool:
        # a constant int first assigned in the branch stays torch.cond's own int output
        # (bounded by the values the arms give); a number that was an operand, a bool
        # (torch.cond 2.14 merges int outputs only: "expected both a and b to be
        # FakeTensor"), a float, or a symbolic number travels as a tensor
        return i in numbers and isinstance(v, NUMBER) and (
            every or i in always or type(v) is not int)

    def arm(fn: Callable) -> Callable:
        def run(*tensors):
            full = list(operands)
            for i, t in zip(kept, tensors, strict=True):
                full[i] = t.item() if i in symbolic else t
            leaves, spec = pytree.tree_flatten(fn(*full))
            leaves = [number_tensor(v) if carried(i, v) else
                      number_tensor(v, device=_device(tensors)) if _like_read(reads_at, i, v)
                      else _flagged(v) for i, v in enumerate(leaves)]
            return pytree.tree_unflatten(leaves, spec)
        run.__name__ = getattr(fn, "__name__", "arm")
        return run

    return arm(true_fn), arm(false_fn), tuple(
        number_tensor(operands[i]) if i in symbolic else operands[i] for i in kept), numbers


def _leaf_indices(operands: tuple, ins: tuple, outs: tuple, positions: list[int]):
    """Flat leaf indices of the top-level outputs at ``positions``, when every output before
    them is a single leaf (a name bound to a tensor or a number, as branch outputs are)."""
    before = {name: o for name, o in zip(ins, operands, strict=False)}
    indices = set()
    for j in positions:
        if all(isinstance(before.get(name), (torch.Tensor, *NUMBER)) for name in outs[:j]):
            indices.add(j)
    return frozenset(indices)


class Flag(NamedTuple):
    """A bool an arm returned that no eager run saw (the branch never ran: ``numbers`` does
    not name it), as a 0-d bool tensor; the type marks the leaf, so ``read_back`` reads it
    back as a bool (a 0-d bool tensor the branch itself returns stays a tensor). Both arms
    must give one there, as torch.cond wants one output structure."""

    value: torch.Tensor


class NoValue(NamedTuple):
    """A ``None`` an arm returned: a pytree node without leaves (torch.cond 2.14 returns
    no constant but an int: "unsupported branch return type (constant non-int)"), read
    back as ``None``. Both arms must give one there."""


def _flagged(value):
    if value is None:
        return NoValue()
    return Flag(number_tensor(value)) if isinstance(value, bool | torch.SymBool) else value


def _flagging(fn: Callable, reads_at: dict[int, str]) -> Callable:
    def run(*tensors):
        if not reads_at:
            return pytree.tree_map(_flagged, fn(*tensors))
        leaves, spec = pytree.tree_flatten(fn(*tensors))
        return pytree.tree_unflatten([number_tensor(v, device=_device(tensors))
                                      if _like_read(reads_at, i, v) else _flagged(v)
                                      for i, v in enumerate(leaves)], spec)
    run.__name__ = getattr(fn, "__name__", "arm")
    return run


_KINDS = {bool: "bool", int: "int", float: "float"}


def _like_read(reads_at: dict[int, str], i: int, value) -> bool:
    """Whether leaf ``i`` is a Python number of the kind every eager run gave there as a
    scalar read (a marked 0-d tensor): the arm no example ran gives a constant where the
    other gives the read (``if k != 0: s = 10 / k`` / ``else: s = 0.0``). It travels as a
    0-d tensor of that kind, as the read does (a Python float is no cond output); marked
    after the cond (``mark_reads``)."""
    kind = _KINDS.get(type(value))
    return kind is not None and reads_at.get(i) == kind


def _is_flag(value) -> bool:
    return isinstance(value, Flag | NoValue)


def _unflagged(value):
    if isinstance(value, NoValue):
        return None
    return value.value.item() if isinstance(value, Flag) else value


def read_back(values, numbers: frozenset[int]):
    """The cond's outputs with each number leaf read back as a Python (symbolic) number,
    each ``Flag`` as a bool and each ``NoValue`` as None."""
    values = pytree.tree_map(_unflagged, values, is_leaf=_is_flag)
    if not numbers:
        return values
    leaves, spec = pytree.tree_flatten(values)
    leaves = [v.item() if i in numbers and isinstance(v, torch.Tensor) and v.dim() == 0 else v
              for i, v in enumerate(leaves)]
    return pytree.tree_unflatten(leaves, spec)



def python_number(value: Any) -> Any:
    """A number read from a tensor (``scalar``: a 0-d tensor marked with its kind) as the
    Python number the model's call got (``HISTORY.append(h.min().item())``)."""
    if isinstance(value, torch.Tensor) and value.dim() == 0 \
            and getattr(value, NUMBER_KIND, None) is not None:
        return value.item()
    return value
