"""Branches with side effects in rewritten code: a cond whose arms log their calls, the
logged tensors and a taken-flag returned by the cond, each call replayed by the epilogue
only when its branch ran (also for branches nested in such branches)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from capture.branch_asserts import as_arm

from ...epilogue.entries import NUMBER_KIND, Arg, Entry
from ...epilogue.formatting import Text
from ...epilogue.record import SCALAR_DTYPES, SYM_KINDS
from ...epilogue.replay import emit
from ...epilogue.stand_ins import current_recorder
from ...errors import UnsupportedSideEffectError
from . import rt_text, rt_union, rt_union_fold
from .rt_helper_calls import helper_options
from .rt_lift import lifted
from .rt_numbers import NUMBER as NUMBERS
from .rt_numbers import python_number, read_back, split_python_values
from .rt_predicate import NO_BREAK_YET
from .rt_state import RT, in_traced_body, is_tracing
from .rt_state_sets import record_item_set, record_state_add, record_state_set
from .rt_values import as_number, fresh, same_kind, trace_unaliased
from .site_marks import mark

# Branches with side effects nested in another such branch: their layout (which log
# entries hold tensors, of what shape) is found while the outermost branch probes its arms in
# Python on fake tensors, and read while torch.cond traces those arms under Dynamo, where a
# nested branch cannot probe its own. Key: (site, entries already in the enclosing arm's log
# when it was reached), the same in the probe and in the trace. A module global (as
# CLONE_ALL), read by Dynamo as a constant.
NESTED_LAYOUTS: dict = {}


def _entry(effects: tuple, made: tuple) -> tuple:
    """A log entry as ``(spec, args, guard)``. A branch's own calls are logged as ``(k, args)``
    (``effects[k]`` the spec); a branch nested in it adds ``(spec, args, guard)``, ``guard`` a
    0-d bool tensor (the nested side was taken) or None (always, as a Python-level ``if``)."""
    if len(made) == 2:
        return effects[made[0]], tuple(made[1]), None
    return made


def _fixed_size(value: Any) -> bool:
    """A ``torch.Size`` of plain ints stays one leaf: torch's pytree gives a tuple back for
    it (``h.shape`` logged as "(2, 4)", eager's "torch.Size([2, 4])")."""
    return isinstance(value, torch.Size) and all(type(d) is int for d in value)


def _sizes_kept(original: Any, rebuilt: Any) -> Any:
    """``rebuilt`` (torch's pytree rebuilding ``original``) with each ``torch.Size`` a
    ``torch.Size`` again: torch's pytree gives a tuple back for one holding symbolic sizes
    (``log.info("%s", h.shape)`` would log "(s0, 4)" where eager logs "torch.Size([3, 4])")."""
    if type(original) is torch.Size:
        return torch.Size(list(rebuilt))
    if type(original) in (tuple, list):
        return type(original)(_sizes_kept(o, r) for o, r in zip(original, rebuilt, strict=True))
    if type(original) is dict:
        return {k: _sizes_kept(original[k], rebuilt[k]) for k in original}
    if isinstance(original, Text):
        return Text(rebuilt.pieces, _sizes_kept(original.values, rebuilt.values))
    return rebuilt


def _leaves(args: Any) -> list:
    return pytree.tree_leaves(args, is_leaf=_fixed_size)


def _layout(entries: dict, device: Any) -> list:
    """``(arm, entry, position, meta)`` of every tensor in the arms' logs, true arm first;
    position -1 is the entry's guard. A number known only from data (an ``.item()`` the arm
    keeps symbolic) is laid out as a 0-d tensor on ``device`` (the predicate's); a size with
    a hint (an input's) is the graph's already and stays itself."""
    layout = []
    for arm in (True, False):
        for i, (_spec, args, guard) in enumerate(entries[arm]):
            for j, a in enumerate(_leaves(args)):  # a Text's values too
                if isinstance(a, torch.Tensor):
                    layout.append((arm, i, j, (tuple(a.shape), a.dtype, a.device)))
                elif type(a) in SYM_KINDS and free_unbacked_symbols(a):
                    layout.append((arm, i, j, ((), SCALAR_DTYPES[SYM_KINDS[type(a)]], device)))
            if guard is not None:
                layout.append((arm, i, -1, (tuple(guard.shape), guard.dtype, guard.device)))
    return layout


def _arm_fn(site: str, arm: bool, fn: Callable, layout: list, device: Any) -> Callable:
    """A cond arm that returns its outputs, then the tensors of its log by ``layout`` (zeros
    where the other arm logs them), then a flag: true in the true arm."""
    def run(*ops):
        outs, log = fn(*ops)
        extra = []
        for which, i, j, (shape, dtype, dev) in layout:
            if which == arm:
                if i >= len(log):  # the layout is the probe's, run outside torch.cond
                    raise RuntimeError(
                        f"stitch: the {'true' if arm else 'false'} side of the branch {site} "
                        f"made {len(log)} deferred call(s) while torch.cond traced it, fewer "
                        "than when it ran on fake tensors before: a test inside it went "
                        "another way in that trace (a test on a size torch.cond's trace "
                        "decided), so its calls cannot be carried out of the cond")
                value = log[i][2] if j < 0 else _leaves(log[i][1])[j]
                # a number laid out as a 0-d tensor may be one already when traced
                extra.append(value.clone().to(dtype) if isinstance(value, torch.Tensor) else
                             torch.scalar_tensor(value, dtype=dtype, device=dev))
            else:
                extra.append(torch.zeros(shape, dtype=dtype, device=dev))
        # on the predicate's device: a CPU flag next to CUDA outputs is a host copy, which
        # breaks CUDA-graph capture of the graph
        flag = (torch.ones if arm else torch.zeros)((), dtype=torch.bool, device=device)
        return (*fresh(tuple(outs), ops), *extra, flag)
    return run


def cond_effects(site: str, predicate: Any, true_fn: Callable, false_fn: Callable,
                 operands: tuple, effects: tuple, log: list | None = None,
                 reads: int = 0, outputs: bool = False, optional: bool = False) -> tuple:
    """A cond whose branches hold side effects.

    Each branch returns ``(outputs, log)``: ``log`` lists the effect calls the branch made,
    in the order made (a call in a loop once per iteration, one behind a Python-level ``if``
    only when reached; see ``_entry``). ``effects[k]`` is ``(kind, arm, options,
    location)``. Run eagerly, the taken branch's calls are made right after it. Traced, the
    tensors among their arguments become cond outputs (the other branch returns zeros of the
    same shape, found by running both branches on fake tensors without recording), and each
    call is added to the epilogue, guarded by a flag the cond returns: it replays exactly
    when its branch ran. ``log``: the log of the enclosing branch's arm when this branch is
    nested in another with side effects; the calls go there, each with its guard, in order.
    ``reads``: the last operands are names the arms only read (``rt_numbers``).
    ``outputs``: what the arms give reaches the program's outputs as it is: outputs of
    different structures are carried there (``rt_union.py``). ``optional`` (an arm may give
    None: ``cond_keywords.mark_structures`` marks both kinds of cond) is not read here.
    """
    if predicate is NO_BREAK_YET:  # a loop's first iteration (break_guard): no cond, as
        outs, made = true_fn(*operands)  # rt_control.cond; forcing the site leaves it be
        _made(effects, made, log)
        return tuple(outs)
    if not isinstance(predicate, torch.Tensor):
        # a Python value here (a size, concrete when run eagerly) can still be a cond in the
        # graph (an unbacked size while tracing: an unrolled loop's ``i < n``): forcing the
        # site forces it here too, and the side an example takes is noted (rt_control.cond)
        taken = bool(predicate)
        if not torch.compiler.is_dynamo_compiling():
            taken = RT.force.get(site, taken)
            if RT.eager_branches:
                RT.outcomes.append((site, taken))
        elif log is None:
            # the census (torch.compile of the rewritten model) on a size Dynamo holds
            # concrete: the side runs in Python, as a tensor predicate's does below. Inlined,
            # its calls would break inside the arm, in a loop's frame Dynamo then skips
            return _python_side(true_fn if taken else false_fn, operands, effects)
        outs, made = (true_fn if taken else false_fn)(*operands)
        _made(effects, made, log)
        return tuple(outs)
    if torch.compiler.is_dynamo_compiling():
        if log is not None and (site, len(log)) in NESTED_LAYOUTS:
            # traced as part of the enclosing branch's arm, which probed it
            return _traced_nested(site, predicate, true_fn, false_fn, operands, log, reads)
        # torch.compile of the rewritten model (the census): Python, a break by design
        outs, made = (true_fn if bool(predicate) else false_fn)(*operands)
        _made(effects, made, log)
        return tuple(outs)
    if RT.probing:
        if log is None:
            calls = ", ".join(spec[3] for spec in effects)
            raise RuntimeError(
                f"stitch: a branch with side effects (calls at {calls}) runs in a function "
                "called from inside another branch with side effects; stitch defers calls in "
                "branches nested in the same function, not across a call. Move the call out "
                "of one of the branches, or run the model eagerly")
        return _probe_nested(site, predicate, true_fn, false_fn, operands, effects, log,
                             outputs)
    if not is_tracing():
        taken = RT.force.get(site, bool(predicate))
        RT.outcomes.append((site, taken))
        outs, made = (true_fn if taken else false_fn)(*operands)
        _made(effects, made, log)
        return tuple(outs)
    return _traced(site, predicate, true_fn, false_fn, operands, effects, log, reads, outputs)


@torch.compiler.disable
def _python_side(side: Callable, operands: tuple, effects: tuple) -> tuple:
    outs, made = side(*operands)
    _made(effects, made, None)
    return tuple(outs)


def _made(effects: tuple, made: list, log: list | None) -> None:
    """The calls a branch run as Python made: into the enclosing branch's log, else made
    now (eagerly; while exporting, the recorder defers what they print, log or append)."""
    entries = [_entry(effects, item) for item in made]
    if log is not None:
        log.extend(entries)
        return
    traced = not torch.compiler.is_dynamo_compiling() and is_tracing()
    if traced:  # a predicate that is a Python value while exporting: the arm is the graph's
        _check_appends([spec for spec, _a, _g in entries])
    for spec, args, guard in entries:
        if traced:
            _record(spec, args, guard)
        elif guard is None or bool(guard):
            emit(spec[0], [pytree.tree_map(python_number, a) for a in args], dict(spec[2]))



def _check_appends(specs) -> None:
    for kind, _arm, options, where in specs:
        if kind == "append" and "target" not in options:
            raise UnsupportedSideEffectError(
                f"{where}: an append to a list attribute in a branch the examples never "
                "took; stitch defers appends only to lists it saw grow on the examples. "
                "Add an example that takes this branch.")


def _probed(true_fn: Callable, false_fn: Callable, operands: tuple, effects: tuple,
            predicate: Any = None):
    """Both arms run for their metadata: ``({arm: outputs}, {arm: log entries})``; each as
    the arm of a cond on ``predicate`` (a guard in it decided by the arm's test)."""
    RT.probing += 1
    try:
        with in_traced_body():
            probe = {True: as_arm(true_fn, predicate, True, *operands),
                     False: as_arm(false_fn, predicate, False, *operands)}
    finally:
        RT.probing -= 1
    return ({arm: probe[arm][0] for arm in probe},
            {arm: [_entry(effects, m) for m in probe[arm][1]] for arm in probe})


def _traced(site, predicate, true_fn, false_fn, operands, effects, log, reads=0,
            outputs=False) -> tuple:
    """The cond traced at the graph's level (not inside another cond)."""
    if log is None and current_recorder() is None:
        raise RuntimeError("stitch: a branch with side effects was traced outside export")
    try:
        return _traced_cond(site, predicate, true_fn, false_fn, operands, effects, log, reads,
                            outputs)
    finally:
        NESTED_LAYOUTS.clear()  # the nested branches' layouts are for this trace only


def _traced_cond(site, predicate, true_fn, false_fn, operands, effects, log,
                 reads=0, to_outputs=False) -> tuple:
    from torch._guards import detect_fake_mode
    from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing

    env = getattr(detect_fake_mode(operands), "shape_env", None)
    pending = list(env.pending_fresh_unbacked_symbols) if env is not None else None
    try:
        with disable_proxy_modes_tracing():  # metadata only: nothing in the graph
            outputs, entries = _probed(true_fn, false_fn, operands, effects, predicate)
    finally:  # numbers the probe read (an arm's ``.item()``) are not the program's
        if env is not None:
            env.pending_fresh_unbacked_symbols[:] = pending
    _check_appends(list(effects) + [spec for spec, _a, _g in entries[True] + entries[False]])
    layout = _layout(entries, predicate.device)
    n_out = len(outputs[True])
    marked = mark(site, predicate)
    numbers = _numbers(outputs)  # carried as 0-d tensors
    # outputs the arms give different structures: both sides and a flag (rt_union.py)
    union = rt_union.differing(outputs[True], outputs[False]) if to_outputs else ()
    if union:
        true_fn, false_fn = rt_union.union_arms(site, true_fn, false_fn, outputs, union,
                                                logged=True)
        numbers = rt_union.layout_numbers(outputs, union)
    t, f, ops, numbers = split_python_values(
        _arm_fn(site, True, true_fn, layout, predicate.device),
        _arm_fn(site, False, false_fn, layout, predicate.device), tuple(operands), numbers,
        every=True, reads=reads)
    with in_traced_body():
        result = lifted(lambda: trace_unaliased(lambda: torch.cond(marked, t, f, ops)))
    result = read_back(tuple(result), numbers)
    outs, tensors, flag = result[:n_out], result[n_out:-1], result[-1]
    if union:
        outs = rt_union_fold.rebuild(tuple(outs), union)
    by_position = {(a, i, j): t for (a, i, j, _m), t in zip(layout, tensors, strict=True)}
    made = []
    for arm in (True, False):
        arm_flag = (flag if arm else torch.logical_not(flag)) if entries[arm] else None
        for i, (spec, args, guard) in enumerate(entries[arm]):
            leaves, structure = pytree.tree_flatten(args, is_leaf=_fixed_size)
            values = _sizes_kept(args, pytree.tree_unflatten(
                [same_kind(by_position[(arm, i, j)], a) if isinstance(a, torch.Tensor) else
                 as_number(by_position[(arm, i, j)]) if (arm, i, j) in by_position else a
                 for j, a in enumerate(leaves)], structure))
            # a nested call's guard output is false wherever this arm did not run
            made.append((spec, values, arm_flag if guard is None else by_position[(arm, i, -1)]))
    if log is not None:
        log.extend(made)
    else:
        for spec, values, guard in made:
            _record(spec, values, guard)
    return tuple(outs)


def _numbers(outputs: dict) -> frozenset[int]:
    """The output leaves either probed arm gave as a Python number."""
    return frozenset(i for arm in (True, False)
                     for i, v in enumerate(pytree.tree_leaves(outputs[arm]))
                     if isinstance(v, NUMBERS))


def _record(spec: tuple, args: tuple, guard: torch.Tensor | None) -> None:
    """Add one deferred call to the epilogue of the export in progress, replayed when the
    graph output ``guard`` is true (None: always)."""
    recorder = current_recorder()
    if recorder is None:
        raise RuntimeError("stitch: a branch with side effects was traced outside export")
    kind, _arm, options, where = spec
    if kind == "call":
        options = helper_options(options, args, where)
    index = None
    if guard is not None:
        index = recorder.take(guard)
    if kind == "rebind":  # the value's tensors out of the graph; set when the branch ran
        record_state_set(recorder, args[0], options, where, index)
        return
    if kind == "add":  # a counter: the number out of the graph; added when the branch ran
        record_state_add(recorder, args[0], options, where, index)
        return
    if kind == "set_item":  # a dict item: its value out of the graph; set when it ran
        record_item_set(recorder, args[0], options, where, index)
        return
    # a read (marked, ``same_kind``) replays as the number it was, like one outside a branch
    specs = [Arg("tensor", output=recorder.take(a)) if isinstance(a, torch.Tensor)
             and getattr(a, NUMBER_KIND, None) is None else recorder.arg(a) for a in args]
    recorder.entries.append(Entry(kind, where, tuple(specs), dict(options), index))


def _probe_nested(site, predicate, true_fn, false_fn, operands, effects, log,
                  to_outputs=False) -> tuple:
    """Nested in a branch that is probing its arms (Python, fake tensors): probe this one
    too, keep its layout for the trace (``NESTED_LAYOUTS``), and log its calls, each with a
    guard, in the enclosing arm's log as the trace will. Outputs the arms give different
    structures come out as the ``Alternatives`` the trace will give (rt_union.py)."""
    outputs, entries = _probed(true_fn, false_fn, operands, effects)
    union = rt_union.differing(outputs[True], outputs[False]) if to_outputs else ()
    numbers = rt_union.layout_numbers(outputs, union) if union else _numbers(outputs)
    NESTED_LAYOUTS[(site, len(log))] = (
        _layout(entries, predicate.device), {arm: tuple(len(_leaves(args)) for _s, args, _g in entries[arm])
                           for arm in entries}, numbers, union, outputs,
        rt_union.fillers_of(outputs, union) if union else None)
    guard = torch.zeros((), dtype=torch.bool, device=predicate.device)
    for arm in (True, False):
        log.extend((spec, args, guard) for spec, args, _g in entries[arm])
    if union:
        flag = torch.ones((), dtype=torch.bool, device=predicate.device)
        return tuple(rt_union.Alternatives(flag, t, outputs[False][i]) if i in union else t
                     for i, t in enumerate(outputs[True]))
    return tuple(outputs[True])


def _traced_nested(site, predicate, true_fn, false_fn, operands, log, reads=0) -> tuple:
    """Nested in a branch whose arm torch.cond is tracing (Dynamo): the cond, with the layout
    its probe found; the calls go to the enclosing arm's log with their guards (its tensors
    by position; the enclosing branch reads only those)."""
    layout, sizes, numbers, union, probed, fillers = NESTED_LAYOUTS[(site, len(log))]
    marked = mark(site, predicate)
    if union:  # outputs of different structures: both sides and a flag (rt_union.py)
        true_fn, false_fn = rt_union.union_arms(site, true_fn, false_fn, probed, union,
                                                logged=True, fillers=fillers)
    t, f, ops, numbers = split_python_values(  # non-tensor operands: through the closure
        _arm_fn(site, True, true_fn, layout, predicate.device),
        _arm_fn(site, False, false_fn, layout, predicate.device), tuple(operands), numbers,
        every=True, reads=reads)
    result = read_back(tuple(trace_unaliased(lambda: torch.cond(marked, t, f, ops))), numbers)
    n_out = len(result) - len(layout) - 1
    outs, tensors, flag = result[:n_out], result[n_out:-1], result[-1]
    if union:
        outs = rt_union_fold.rebuild(tuple(outs), union)
    by_position = {(a, i, j): t for (a, i, j, _m), t in zip(layout, tensors, strict=True)}
    for arm in (True, False):
        arm_flag = flag if arm else torch.logical_not(flag)
        for i, n_args in enumerate(sizes[arm]):
            # flat: a leaf (0) where no tensor is, so positions match the probe's leaves
            args = tuple(by_position.get((arm, i, j), 0) for j in range(n_args))
            inner = by_position.get((arm, i, -1))
            log.append((None, args, arm_flag if inner is None
                        else torch.logical_and(arm_flag, inner)))
    return tuple(outs)


# Helpers that run a rewritten construct as Python under torch.compile by design (a branch
# with side effects: export makes it a cond, Dynamo breaks on it). Dynamo sometimes names
# a line outside the user's function for such a break (inside a resume function after an
# earlier break; even a line of the function that called stitch.export), so the census
# site is recognised by the helper it stopped in.
RUNS_IN_PYTHON = frozenset({f"{__file__}:cond_effects", f"{rt_text.__file__}:text",
                            f"{rt_text.__file__}:_formatted",
                            f"{rt_union.__file__}:python_branch"})
