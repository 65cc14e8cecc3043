"""Control flow in rewritten code: ``torch.cond``/``torch.where`` for branches,
``torch.while_loop`` for tensor-counted loops and ``while`` on a tensor (the write-backs of
branch-updated attributes after them: ``rt_write_back``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from capture import torch_messages as tm

from ...errors import StitchError
from .rt_map import mapped
from .rt_numbers import (
    branch_keys,
    mark_reads,
    read_back,
    seen_eagerly,
    split_python_values,
)
from .rt_predicate import NO_BREAK_YET, size_pred
from .rt_raising import NestedDataBranch, raising_side
from .rt_select import select
from .rt_state import RT, is_tracing
from .rt_symbolic import is_unbacked
from .rt_union import (
    differing,
    known,
    known_now,
    layout_numbers,
    note_side,
    probe_arms,
    probed_union,
    python_branch,
    union_arms,
)
from .rt_union_fold import rebuild
from .rt_values import (
    fresh,
    scalar,
)
from .rt_while_loop import carried_while_loop
from .site_marks import exporting_now, mark


def cond(site: str, predicate: Any, true_fn: Callable, false_fn: Callable,
         operands: tuple, mode: str = "cond", ins: tuple = (), outs: tuple = (),
         nests: bool = False, reads: int = 0, optional: bool = False,
         outputs: bool = False, raises: bool = False) -> tuple:
    """``torch.cond`` (or ``torch.where`` when ``mode == "where"``) over the branch functions.
    Python numbers among the operands and outputs are carried by ``rt_numbers`` (``ins`` and
    ``outs``: the names of the operands and of the outputs; ``nests``: the arms hold another
    branch, every number travels as a tensor; ``reads``: the last operands are names the
    arms only read; ``optional``: an arm may give None, so the arms' structures may differ
    (rt_union.py); ``outputs``: what the arms give reaches the program's outputs as it is
    (``cond_keywords.carried_to_outputs``), where such a value can be carried; ``raises``:
    an arm holds a ``raise``, which torch.cond cannot trace: under torch.compile (the census)
    the branch runs as Python, a break by design, and while exporting an arm that raises
    wherever it is taken is a check, rt_raising.py)."""
    if predicate is NO_BREAK_YET:  # a loop's first iteration before its break (break_guard)
        return tuple(true_fn(*operands))
    if torch.compiler.is_dynamo_compiling():  # nested in a branch, or re-captured: pure path
        if raises and not exporting_now() and not isinstance(predicate, bool):
            return tuple((true_fn if bool(predicate) else false_fn)(*operands))
        # sides of different structures (rt_union). Under the census, a constant to Dynamo:
        # the table eager runs fill must not become guards (a recompile per example)
        exporting = exporting_now()
        union = known(branch_keys(true_fn, site)) if exporting and outputs else None
        if outputs and (optional or known_now(*branch_keys(true_fn, site))) \
                and not exporting and not isinstance(predicate, bool):
            # the census: torch.cond cannot take it here (and would fail outright on None).
            # Sides of different structures whose outputs are not the program's fail here
            # as before: the rest of the function, then of its callers, goes into each arm
            # (rounds.py), so the value reaches the program's return, the one place the
            # program can carry it
            return python_branch(predicate, true_fn, false_fn, operands)
        if union is not None and not isinstance(predicate, bool):
            return _union_traced(site, predicate, true_fn, false_fn, operands, reads, *union)
        if mode == "where" and isinstance(predicate, bool) and site not in RT.force:
            # a select on a Python truth value while tracing (``e >= self.n`` with ``e`` the
            # unrolled loop's own index): ``torch.where`` of a constant is its side, so
            # only that side runs, as in Python; the other may not even be valid here
            # (``self.w[e]`` for an identity expert past the weights). Both sides of a
            # select are pure (where_rule), so nothing else changes
            return tuple((true_fn if predicate else false_fn)(*operands))
        return _carried(site, predicate, true_fn, false_fn, operands, mode, ins, outs, nests,
                        reads)
    union = known(branch_keys(true_fn, site)) if outputs else None
    if RT.probing and union is not None and isinstance(predicate, torch.Tensor):
        # sides of different structures: the probe of the enclosing arm sees the carried
        # form the trace will give (both sides, for their metadata only)
        return probed_union(site, predicate, true_fn, false_fn, operands, union[1])
    if RT.probing:
        # inside the arm of a branch with side effects run for metadata on fake tensors: a
        # cond without effects only shapes the outputs (its arms agree on them), and tracing
        # it here would leave symbols no graph records (torch.export: "pending unbacked").
        # Its number leaves are noted: a branch no example took runs first here
        out = tuple(true_fn(*operands))
        seen_eagerly(true_fn, out, site)
        return out
    if not isinstance(predicate, torch.Tensor) and site not in RT.force:
        # a Python value here (a size, concrete when run eagerly) can still be a cond in the
        # graph (an unbacked size while tracing): forcing that site forces it here too. The
        # side an example takes is noted as for a tensor predicate: that example verifies it
        taken = bool(predicate)
        if RT.eager_branches:
            RT.outcomes.append((site, taken))
        out = (true_fn if taken else false_fn)(*operands)
        seen_eagerly(true_fn, out, site)
        note_side(branch_keys(true_fn, site), taken, tuple(out))
        return out
    if site in RT.force or RT.eager_branches or not is_tracing():
        # a forced side, a run with eager branches, or plain eager (the census's reference
        # runs): the chosen side runs in Python, as torch.cond would run it (torch.cond run
        # eagerly compiles the branches every call, and recompiles make loop indices in them
        # symbolic)
        taken = RT.force.get(site, bool(predicate))
        RT.outcomes.append((site, taken))
        out = tuple((true_fn if taken else false_fn)(*operands))
        seen_eagerly(true_fn, out, site)
        note_side(branch_keys(true_fn, site), taken, out)
        return out
    try:
        return _traced(site, predicate, true_fn, false_fn, operands, mode, ins, outs, nests,
                       reads, outputs, union)
    except (StitchError, NestedDataBranch):
        raise
    except Exception:
        # one arm raises wherever it is taken (rt_raising.py): a check, and the other arm
        out = raising_side(site, predicate, true_fn, false_fn, operands)
        if out is None:
            raise
        return out


def _traced(site, predicate, true_fn, false_fn, operands, mode, ins, outs, nests, reads,
            outputs, union) -> tuple:
    if union is not None:  # placeholders of the exact shapes, where a probe gives them
        probed = probe_arms(true_fn, false_fn, operands, predicate)
        if probed is not None:
            positions = differing(probed[True], probed[False])
            if not positions:  # this call's sides agree (another iteration's did not)
                return _carried(site, predicate, true_fn, false_fn, operands, mode, ins,
                                outs, nests, reads, outputs)
            union = (probed, positions)
        return _union_traced(site, predicate, true_fn, false_fn, operands, reads, *union)
    return _carried(site, predicate, true_fn, false_fn, operands, mode, ins, outs, nests,
                    reads, outputs)


def arm_when(site: str, predicate: Any, side: bool, outer: Any = None,
             folded: bool = False) -> Any:
    """Where the arm ``side`` of the branch at ``site`` is taken, as a bool tensor (and
    ``outer``, an enclosing arm's), for the checks in it (``arm_checks.py``); ``outer``
    alone where only the taken arm runs: a Python predicate, a forced site, a run with
    eager branches or plain eager. ``folded``: a branch folded into its checks, computed on
    every input, eager too. The predicate is marked as the branch marks it: forced-side
    verification replaces the marked predicate, and the gate must follow the forced side."""
    if not isinstance(predicate, torch.Tensor):
        return outer
    if not folded and not torch.compiler.is_dynamo_compiling() and (
            site in RT.force or RT.eager_branches or not is_tracing()):
        return outer
    if not folded:
        predicate = mark(site, predicate)
    when = torch.logical_not(predicate) if not side else \
        predicate if predicate.dtype == torch.bool else predicate.bool()
    return when if outer is None else torch.logical_and(when, outer)


def _carried(site, predicate, true_fn, false_fn, operands, mode, ins=(), outs=(),
             nests=False, reads=0, outputs=False) -> tuple:
    """The traced cond, Python numbers carried (rt_numbers); numbers are read back outside
    the branch body, where the scalar read is captured like any other."""
    if reads and torch.compiler.is_dynamo_compiling():
        operands = _unshared_reads(operands, reads)
    if torch.compiler.is_dynamo_compiling():
        return _carried_lifting(site, predicate, true_fn, false_fn, operands, mode, ins,
                                outs, nests, reads)
    try:
        return _carried_lifting(site, predicate, true_fn, false_fn, operands, mode, ins,
                                outs, nests, reads)
    except StitchError:
        raise
    except Exception as e:
        if not outputs:  # a value of two structures can be carried only to the outputs
            raise
        # the arms may disagree on an output's structure (rt_union.py): decided from their
        # metadata, not from torch's message; where they agree, torch's error stands
        out = union_cond(site, predicate, true_fn, false_fn, operands, reads)
        if out is None:
            raise
        del e
        return out


def _carried_lifting(site, predicate, true_fn, false_fn, operands, mode, ins, outs, nests,
                     reads) -> tuple:
    try:
        return _carried_once(site, predicate, true_fn, false_fn, operands, mode, ins, outs,
                             nests, reads, lift=True)
    except AssertionError as e:
        # a size known only at run time lifted into the arms as itself (rt_lift.py) that an
        # arm's op constrains (``torch.arange(frames)`` in ``if frames > 1:``, frames read
        # from a grid): Dynamo's check of its guards against the frame's inputs cannot
        # decide it (tm.GUARD_FAILED_SAME_FRAME).
        # Carried as a 0-d tensor and read in the arm instead, the constraint is the arm's
        # own runtime assertion (branch_asserts.py keeps it to that arm)
        if not tm.matches(tm.GUARD_FAILED_SAME_FRAME, str(e)):
            raise
        return _carried_once(site, predicate, true_fn, false_fn, operands, mode, ins, outs,
                             nests, reads, lift=False)


def _carried_once(site, predicate, true_fn, false_fn, operands, mode, ins, outs, nests,
                  reads, lift) -> tuple:
    branch = true_fn
    true_fn, false_fn, operands, numbers = split_python_values(true_fn, false_fn, operands,
                                                               None, ins, outs, every=nests,
                                                               site=site, reads=reads,
                                                               lift=lift)
    return mark_reads(branch, read_back(select(mark(site, predicate), true_fn, false_fn,
                                                 operands, mode), numbers), site)


def union_cond(site, predicate, true_fn, false_fn, operands, reads) -> tuple | None:
    """The branch with each output its arms give different structures carried as
    ``Alternatives`` (rt_union.py); None where the arms agree (or cannot be probed)."""
    probed = probe_arms(true_fn, false_fn, operands, predicate)
    positions = differing(probed[True], probed[False]) if probed is not None else ()
    if not positions:
        return None
    return _union_traced(site, predicate, true_fn, false_fn, operands, reads, probed,
                         positions)


def _union_traced(site, predicate, true_fn, false_fn, operands, reads, probed,
                  positions) -> tuple:
    t, f = union_arms(site, true_fn, false_fn, probed, positions)
    numbers = layout_numbers(probed, positions)
    t, f, ops, numbers = split_python_values(t, f, tuple(operands), numbers, every=True,
                                             site=site, reads=reads)
    out = read_back(select(mark(site, predicate), t, f, ops, "cond"), numbers)
    return rebuild(tuple(out), positions)


def _unshared_reads(operands: tuple, reads: int) -> tuple:
    """The operands, each read-only view (the last ``reads``) that shares its base with
    another tensor operand a copy: ``row, col = idxs[i]`` read in a nested cond's arms
    (under Dynamo, which cannot retry its trace on copies as ``_traced_cond`` does: "input-
    to-input aliasing"). The arms read the same values."""
    def root(t):
        return t if t._base is None else t._base

    tensors = [o for o in operands if isinstance(o, torch.Tensor)]
    out = list(operands)
    for i in range(len(operands) - reads, len(operands)):
        o = operands[i]
        if isinstance(o, torch.Tensor) and o._base is not None and any(
                t is not o and root(t) is o._base for t in tensors):
            out[i] = o.clone()
    return tuple(out)


def trip_count(value: Any) -> Any:
    """The stop value of ``range(...)`` in a rewritten loop: a 0-d int64 tensor or an int."""
    if isinstance(value, torch.Tensor):
        return scalar(value, int)
    return int(value)


def while_range(site: str, stop: Any, body_fn: Callable, carried: tuple) -> tuple:
    """``for i in range(stop): carried = body_fn(i, *carried)`` as ``torch.while_loop``."""
    if not isinstance(stop, torch.Tensor):
        for i in range(stop):
            carried = tuple(body_fn(i, *carried))
        return carried

    start = torch.zeros((), dtype=torch.int64, device=stop.device)

    def cond_fn(i, *state):
        return i < stop

    def step(i, *state):
        return (i + 1, *fresh(tuple(body_fn(i, *state)), state))

    if not torch.compiler.is_dynamo_compiling() and not is_tracing():
        # eager: a plain loop computes the same thing without tracing both functions
        i = 0
        while i < int(stop):
            carried = tuple(body_fn(torch.tensor(i), *carried))
            i += 1
        return carried
    out = carried_while_loop(cond_fn, step, (start, *carried))
    # copies: torch 2.14 fails ("'<' not supported between NoneType and int") to move the
    # loop's outputs into a later cond that holds another while_loop
    return tuple(o.clone() if isinstance(o, torch.Tensor) else o for o in out[1:])


def while_over(site: str, seq: Any, body_fn: Callable, carried: tuple,
               stacked: int = 0) -> tuple:
    """``for v in seq: carried = body_fn(v, *carried)``. A tensor whose length is only known
    at run time (``torch.unique``, ``nonzero`` results, a dynamic dimension torch.export
    traces: ``_length_from_data``) becomes
    ``torch.while_loop`` over its rows (each row as iterating gives it); anything else, a
    plain Python loop. ``stacked``: the body's last outputs are items of lists, one per row
    (``stacked_lists``), returned after the carried values: lists in Python, the rows'
    items stacked (torch's ``map``) where the length is known only at run time."""
    if not (isinstance(seq, torch.Tensor) and seq.dim() > 0 and _length_from_data(seq)):
        if not stacked:
            for v in seq:
                carried = tuple(body_fn(v, *carried))
            return carried
        lists: list[list] = [[] for _ in range(stacked)]
        for v in seq:
            out = tuple(body_fn(v, *carried))
            carried = out[:len(out) - stacked]
            for k in range(stacked):
                lists[k].append(out[len(out) - stacked + k])
        return (*carried, *lists)
    if stacked:  # nothing carried (tensor_loop refuses a body that carries and grows)
        return mapped(seq, lambda row: body_fn(row))

    length = seq.shape[0]
    start = torch.zeros((), dtype=torch.int64, device=seq.device)

    def cond_fn(i, *state):
        return i < length

    def step(i, *state):
        # index_select, not seq[i]: indexing with a traced 0-d tensor reads it as a Python
        # int inside the body, which while_loop cannot keep (measured on torch 2.14)
        row = seq.index_select(0, i.reshape(1)).squeeze(0)
        return (i + 1, *fresh(tuple(body_fn(row, *state)), state))

    out = carried_while_loop(cond_fn, step, (start, *carried))
    return tuple(o.clone() if isinstance(o, torch.Tensor) else o for o in out[1:])


def _length_from_data(seq: torch.Tensor) -> bool:
    """The number of rows is known only at run time: from data (unbacked), or a dynamic
    dimension while torch.export traces. Dynamo's own frames (the census) keep their Python
    loop over a dynamic dimension: Dynamo unrolls it, as it does the model as written."""
    length = seq.shape[0]
    if is_unbacked(length):
        return True
    return not isinstance(length, int) and not torch.compiler.is_dynamo_compiling()


def go() -> Any:
    """A loop's "no iteration broke yet" flag (``break_guard``) before its first iteration:
    true, so that iteration runs as written (``cond`` makes no cond on it)."""
    return NO_BREAK_YET


def keep_going(stopped: Any) -> Any:
    """The flag after an iteration whose breaking test gave ``stopped``: ``not stopped``, a
    0-d bool tensor when the test was a tensor or a test on a dynamic size (``size_pred``),
    so the later iterations' ``if`` become conds, not guards on the size."""
    stop = size_pred(stopped)
    if isinstance(stop, torch.Tensor):
        return torch.logical_not(stop)
    return not stop


def while_true(site: str, cond_fn: Callable, body_fn: Callable, carried: tuple) -> tuple:
    """``while cond_fn(*carried): carried = body_fn(*carried)``. Traced, a tensor condition
    becomes ``torch.while_loop`` (the carried values keep their shapes and dtypes, its rule);
    in eager, or on a Python truth value, a plain Python loop."""
    if not torch.compiler.is_dynamo_compiling() and not is_tracing():
        while bool(cond_fn(*carried)):
            carried = tuple(body_fn(*carried))
        return carried
    def step(*state):
        return fresh(tuple(body_fn(*state)), state)

    out = carried_while_loop(cond_fn, step, tuple(carried))
    return tuple(o.clone() if isinstance(o, torch.Tensor) else o for o in out)
