"""What rewritten functions call at run time (bound to the name ``__stitch_rt__``).

Every helper behaves exactly like the Python it replaced when its inputs are plain Python
values, so a rewrite only changes behaviour where a tensor would have broken the graph.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, unquote

import torch
import torch.utils._pytree as pytree

from ..epilogue import record as _record_module
from .site_marks import exporting_now, mark

CHECK_PREFIX = "[stitch:"
# Characters an in-graph check message keeps as they are. Everything else (quotes,
# backslashes, newlines, ``?``, ``%``, brackets, non-ASCII) is percent-encoded: Inductor's
# C++ backend pastes the message into a string literal without escaping it, so one quote or
# newline in a model's assert message (or a guard's reason) made the kernel fail to compile.
_MESSAGE_SAFE = " !#$&'()*+,-./:;<=>@^_`{|}~"
_CHECK = re.compile(r"\[stitch:([^:\]]+):([A-Za-z_][\w.]*):([^\]]*)\]")


def encode_message(message: str) -> str:
    """A check's message as rewritten code carries it (done at rewrite time: Dynamo cannot
    trace ``quote``). ``parse_check`` decodes it from the error a failed check raises."""
    return quote(message, safe=_MESSAGE_SAFE)


def parse_check(text: str) -> tuple[str, str, str] | None:
    """``(site, type name, message)`` from an error raised by an in-graph check, or None.
    Backends add their own text around the message; the brackets delimit it."""
    match = _CHECK.search(text)
    if match is None:
        return None
    site, type_name, message = match.groups()
    return site, type_name, unquote(message)


class Runtime(threading.local):
    """Per-thread state: forced branch outcomes (verification runs)."""

    def __init__(self) -> None:
        self.force: dict[str, bool] = {}  # site id -> outcome, for eager forced runs
        self.eager_branches = False  # run conds as plain Python (forced verification runs)
        self.outcomes: list[tuple[str, bool]] = []  # (site, taken) seen in eager runs
        self.checks = "auto"  # Settings.checks of the export in progress
        self.bodies = 0  # torch.cond/while_loop bodies being traced right now
        self.probing = 0  # branches with side effects running their arms for metadata


RT = Runtime()


def _tracing_a_body() -> bool:
    return RT.bodies > 0


_record_module.inside_body = _tracing_a_body  # text formatted in a body stays as it was


def is_tensor(value: Any) -> bool:
    return isinstance(value, torch.Tensor)


def scalar(value: Any, kind: Callable | None = None) -> Any:
    """``t.item()``, ``float(t)``, ``int(t)``, ``bool(t)``: tensors stay 0-d tensors."""
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise RuntimeError(f"a Tensor with {value.numel()} elements cannot be converted "
                               "to Scalar")
        value = value.reshape(())
        if kind is bool:
            return value.bool()
        if kind is int and value.is_floating_point():
            return value.trunc().long()
        if kind is float and not value.is_floating_point():
            return value.double()
        return value
    return kind(value) if kind is not None else value


def pred(value: Any) -> Any:
    """A branch predicate: a 0-d bool tensor, or the Python truth value."""
    if isinstance(value, torch.Tensor):
        if value.dtype == torch.bool and value.dim() == 0:
            return value  # already what torch.cond takes: no reshape/convert in the graph
        if value.numel() != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return value.reshape(()).bool()
    return bool(value)


def logical_and(*thunks: Callable[[], Any]) -> Any:
    """``a and b and ...`` as a predicate, each operand a thunk. Python values keep Python's
    short-circuit (a falsy Python operand decides the whole predicate); tensors combine with
    ``torch.logical_and``. Only truthiness is kept, as in an ``if`` test."""
    result: Any = True
    for thunk in thunks:
        value = thunk()
        if isinstance(value, torch.Tensor):
            result = value if result is True else torch.logical_and(pred(result), pred(value))
        elif not value:
            return value
    return result


def logical_or(*thunks: Callable[[], Any]) -> Any:
    result: Any = False
    for thunk in thunks:
        value = thunk()
        if isinstance(value, torch.Tensor):
            result = value if result is False else torch.logical_or(pred(result), pred(value))
        elif value:
            return value
    return result


def logical_not(value: Any) -> Any:
    return torch.logical_not(pred(value)) if isinstance(value, torch.Tensor) else not value


# Retrying a cond/while_loop whose outputs alias a tensor the branch closes over: clone all.
# A module global (not RT): branch code runs under Dynamo, which guards on module globals.
CLONE_ALL = False


def fresh(values: tuple, operands: tuple | None = None) -> tuple:
    """Branch outputs must not alias branch inputs (torch.cond and while_loop refuse). With
    the branch's ``operands``, clone only outputs that are an operand, so the graph holds no
    copy a hand-written cond would not; without them, clone every tensor. An output that
    aliases anything else (a view, a tensor closed over) makes the trace fail, and
    ``_unaliased`` retries it with every output cloned."""
    def one(v):
        if isinstance(v, torch.Tensor) and (operands is None or CLONE_ALL
                                            or any(v is o for o in operands)):
            return v.clone()
        return v

    return tuple(pytree.tree_map(one, v) for v in values)


def _unaliased(trace: Callable[[], Any]) -> Any:
    """Run a cond/while_loop trace; if it fails on aliasing, trace again cloning every
    branch output."""
    global CLONE_ALL
    if CLONE_ALL:
        return trace()
    try:
        return trace()
    except Exception as e:
        if "alias" not in str(e).lower():
            raise
    CLONE_ALL = True
    try:
        return trace()
    finally:
        CLONE_ALL = False


def cond(site: str, predicate: Any, true_fn: Callable, false_fn: Callable,
         operands: tuple, mode: str = "cond") -> tuple:
    """``torch.cond`` (or ``torch.where`` when ``mode == "where"``) over the branch functions."""
    if torch.compiler.is_dynamo_compiling():  # nested in a branch, or re-captured: pure path
        return _select(mark(site, predicate), true_fn, false_fn, operands, mode)
    if not isinstance(predicate, torch.Tensor):
        return (true_fn if predicate else false_fn)(*operands)
    if site in RT.force or RT.eager_branches:
        taken = RT.force.get(site, bool(predicate))
        RT.outcomes.append((site, taken))
        return (true_fn if taken else false_fn)(*operands)
    if not _tracing():
        RT.outcomes.append((site, bool(predicate)))
    return _select(mark(site, predicate), true_fn, false_fn, operands, mode)


def _select(predicate, true_fn, false_fn, operands, mode) -> tuple:
    with _in_body():
        if mode == "where":
            t, f = true_fn(*operands), false_fn(*operands)
            if all(_same_meta(a, b) for a, b in zip(t, f, strict=True)):
                return tuple(torch.where(predicate, a, b) for a, b in zip(t, f, strict=True))
        return tuple(_unaliased(lambda: torch.cond(predicate, true_fn, false_fn,
                                                   tuple(operands))))


@contextlib.contextmanager
def _in_body():
    """Counts the branch/loop bodies being traced: a check inside one stays in the graph (the
    epilogue sees only the top level). Not under Dynamo, which would trace the counter."""
    if torch.compiler.is_dynamo_compiling():
        yield
        return
    RT.bodies += 1
    try:
        yield
    finally:
        RT.bodies -= 1


@contextlib.contextmanager
def check_policy(mode: str):
    """``Settings.checks`` for the export in progress."""
    if mode not in ("auto", "graph", "epilogue"):
        from ..errors import StitchError

        raise StitchError(f"Settings.checks is {mode!r}; expected 'auto', 'graph' or "
                          "'epilogue'")
    previous, RT.checks = RT.checks, mode
    try:
        yield
    finally:
        RT.checks = previous


def _same_meta(a: Any, b: Any) -> bool:
    return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
            and a.shape == b.shape and a.dtype == b.dtype and a.device == b.device)


def _tracing() -> bool:
    from torch.fx.experimental.proxy_tensor import get_proxy_mode

    return get_proxy_mode() is not None or torch._guards.detect_fake_mode() is not None


def check(site: str, ok: Any, encoded: str, exc_type: type = AssertionError) -> None:
    """A data-dependent assert/raise. Eager: raises as the model did. Traced: the condition
    goes to the epilogue (``Settings.checks``) or stays in the graph as
    ``torch._assert_async``, whose failure text is ``[stitch:SITE:TYPE:MESSAGE]`` (message
    from ``encode_message``)."""
    if not isinstance(ok, torch.Tensor):
        if not ok:
            raise exc_type(unquote(encoded)) if encoded else exc_type()
        return
    if torch.compiler.is_dynamo_compiling():
        # inside a cond/while body: Dynamo's `list(t.size()) == [.., <0-d tensor>, ..]` is a
        # tensor whose dtype it cannot read (Longformer's asserts); as_tensor makes it one
        ok = torch.as_tensor(ok, dtype=torch.bool)
    _checked(site, pred(ok), exc_type.__name__, encoded)


def _checked(site: str, ok: torch.Tensor, type_name: str, encoded: str) -> None:
    if not torch.compiler.is_dynamo_compiling() and not _tracing():
        if not bool(ok):  # eager: on the host, like the model (no device-side assert)
            from ..errors import check_failure

            raise check_failure(type_name, unquote(encoded))
        return
    recorder = _check_recorder(ok)
    if recorder is not None:
        recorder.defer_check(site, ok, type_name, unquote(encoded), _user_location())
        return
    torch._assert_async(ok, f"{CHECK_PREFIX}{site}:{type_name}:{encoded}]")


def _check_recorder(ok: torch.Tensor):
    """The recorder of the export in progress when this check goes to its epilogue."""
    if torch.compiler.is_dynamo_compiling() or RT.bodies or RT.checks == "graph":
        return None
    if RT.checks == "auto" and ok.device.type == "cpu":
        return None
    from ..epilogue.record import current_recorder

    return current_recorder()


def _user_location() -> str:
    """file:line of the rewritten code that called into this module."""
    import sys

    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
    return f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame else ""


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
    from torch._higher_order_ops import while_loop

    start = torch.zeros((), dtype=torch.int64, device=stop.device)

    def cond_fn(i, *state):
        return i < stop

    def step(i, *state):
        return (i + 1, *fresh(tuple(body_fn(i, *state)), state))

    if not torch.compiler.is_dynamo_compiling() and not _tracing():
        # eager: a plain loop computes the same thing without tracing both functions
        i = 0
        while i < int(stop):
            carried = tuple(body_fn(torch.tensor(i), *carried))
            i += 1
        return carried
    with _in_body():
        out = _unaliased(lambda: while_loop(cond_fn, step, (start, *carried)))
    # copies: torch 2.14 fails ("'<' not supported between NoneType and int") to move the
    # loop's outputs into a later cond that holds another while_loop
    return tuple(o.clone() if isinstance(o, torch.Tensor) else o for o in out[1:])


def write_back(owner: Any, attr: str, value: Any, inplace: bool = False) -> None:
    """After a cond: write a branch-updated attribute back to its module. ``inplace`` (the
    branch updated it with ``+=`` and friends) copies into the existing tensor, as the
    original in-place op did; otherwise the attribute is rebound, as ``self.x = v`` did."""
    current = getattr(owner, attr, None)
    is_buffer = attr in getattr(owner, "_buffers", {})
    same_meta = (isinstance(current, torch.Tensor) and isinstance(value, torch.Tensor)
                 and current.shape == value.shape and current.dtype == value.dtype)
    # while exporting, a buffer must be mutated in place for torch.export to record it
    # (strict=True: Dynamo traces this; it drops a rebound buffer)
    exporting = is_buffer and (exporting_now() if torch.compiler.is_dynamo_compiling()
                               else _tracing())
    if same_meta and (inplace or exporting):
        # no_grad only where autograd would refuse the in-place copy (a leaf that requires
        # grad, e.g. a Parameter): elsewhere it would put a grad-mode HOP around the copy
        context = torch.no_grad() if current.is_leaf and current.requires_grad else \
            contextlib.nullcontext()
        with context:
            current.copy_(value)
    else:
        setattr(owner, attr, value)


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


def _layout(entries: dict) -> list:
    """``(arm, entry, position, meta)`` of every tensor in the arms' logs, true arm first;
    position -1 is the entry's guard."""
    layout = []
    for arm in (True, False):
        for i, (_spec, args, guard) in enumerate(entries[arm]):
            for j, a in enumerate(args):
                if isinstance(a, torch.Tensor):
                    layout.append((arm, i, j, (tuple(a.shape), a.dtype, a.device)))
            if guard is not None:
                layout.append((arm, i, -1, (tuple(guard.shape), guard.dtype, guard.device)))
    return layout


def _arm_fn(arm: bool, fn: Callable, layout: list, device: Any) -> Callable:
    """A cond arm that returns its outputs, then the tensors of its log by ``layout`` (zeros
    where the other arm logs them), then a flag: true in the true arm."""
    def run(*ops):
        outs, log = fn(*ops)
        extra = []
        for which, i, j, (shape, dtype, dev) in layout:
            if which == arm:
                extra.append((log[i][2] if j < 0 else log[i][1][j]).clone())
            else:
                extra.append(torch.zeros(shape, dtype=dtype, device=dev))
        # on the predicate's device: a CPU flag next to CUDA outputs is a host copy, which
        # breaks CUDA-graph capture of the graph
        flag = (torch.ones if arm else torch.zeros)((), dtype=torch.bool, device=device)
        return (*fresh(tuple(outs), ops), *extra, flag)
    return run


def cond_effects(site: str, predicate: Any, true_fn: Callable, false_fn: Callable,
                 operands: tuple, effects: tuple, log: list | None = None) -> tuple:
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
    """
    if not isinstance(predicate, torch.Tensor):
        outs, made = (true_fn if predicate else false_fn)(*operands)
        _made(effects, made, log)
        return tuple(outs)
    if torch.compiler.is_dynamo_compiling():
        if log is not None and (site, len(log)) in NESTED_LAYOUTS:
            # traced as part of the enclosing branch's arm, which probed it
            return _traced_nested(site, predicate, true_fn, false_fn, operands, log)
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
        return _probe_nested(site, predicate, true_fn, false_fn, operands, effects, log)
    if not _tracing():
        taken = RT.force.get(site, bool(predicate))
        RT.outcomes.append((site, taken))
        outs, made = (true_fn if taken else false_fn)(*operands)
        _made(effects, made, log)
        return tuple(outs)
    return _traced(site, predicate, true_fn, false_fn, operands, effects, log)


def _made(effects: tuple, made: list, log: list | None) -> None:
    """The calls a branch run as Python made: into the enclosing branch's log, else made
    now (eagerly; while exporting, the recorder defers what they print, log or append)."""
    from ..epilogue.replay import emit

    entries = [_entry(effects, item) for item in made]
    if log is not None:
        log.extend(entries)
        return
    traced = not torch.compiler.is_dynamo_compiling() and _tracing()
    if traced:  # a predicate that is a Python value while exporting: the arm is the graph's
        _check_appends([spec for spec, _a, _g in entries])
    for spec, args, guard in entries:
        if traced:
            _record(spec, args, guard)
        elif guard is None or bool(guard):
            emit(spec[0], list(args), dict(spec[2]))


def _check_appends(specs) -> None:
    for kind, _arm, options, where in specs:
        if kind == "append" and "target" not in options:
            from ..errors import UnsupportedSideEffectError

            raise UnsupportedSideEffectError(
                f"{where}: an append to a list attribute in a branch the examples never "
                "took; stitch defers appends only to lists it saw grow on the examples. "
                "Add an example that takes this branch.")


def _probed(true_fn: Callable, false_fn: Callable, operands: tuple, effects: tuple):
    """Both arms run for their metadata: ``({arm: outputs}, {arm: log entries})``."""
    RT.probing += 1
    try:
        with _in_body():
            probe = {True: true_fn(*operands), False: false_fn(*operands)}
    finally:
        RT.probing -= 1
    return ({arm: probe[arm][0] for arm in probe},
            {arm: [_entry(effects, m) for m in probe[arm][1]] for arm in probe})


def _traced(site, predicate, true_fn, false_fn, operands, effects, log) -> tuple:
    """The cond traced at the graph's level (not inside another cond)."""
    from ..epilogue.record import current_recorder

    if log is None and current_recorder() is None:
        raise RuntimeError("stitch: a branch with side effects was traced outside export")
    try:
        return _traced_cond(site, predicate, true_fn, false_fn, operands, effects, log)
    finally:
        NESTED_LAYOUTS.clear()  # the nested branches' layouts are for this trace only


def _traced_cond(site, predicate, true_fn, false_fn, operands, effects, log) -> tuple:
    from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing

    with disable_proxy_modes_tracing():  # metadata only: nothing in the graph
        outputs, entries = _probed(true_fn, false_fn, operands, effects)
    _check_appends(list(effects) + [spec for spec, _a, _g in entries[True] + entries[False]])
    layout = _layout(entries)
    n_out = len(outputs[True])
    marked = mark(site, predicate)
    with _in_body():
        result = _unaliased(lambda: torch.cond(
            marked, _arm_fn(True, true_fn, layout, predicate.device),
            _arm_fn(False, false_fn, layout, predicate.device), tuple(operands)))
    outs, tensors, flag = result[:n_out], result[n_out:-1], result[-1]
    by_position = {(a, i, j): t for (a, i, j, _m), t in zip(layout, tensors, strict=True)}
    made = []
    for arm in (True, False):
        arm_flag = (flag if arm else torch.logical_not(flag)) if entries[arm] else None
        for i, (spec, args, guard) in enumerate(entries[arm]):
            values = tuple(by_position[(arm, i, j)] if isinstance(a, torch.Tensor) else a
                           for j, a in enumerate(args))
            # a nested call's guard output is false wherever this arm did not run
            made.append((spec, values, arm_flag if guard is None else by_position[(arm, i, -1)]))
    if log is not None:
        log.extend(made)
    else:
        for spec, values, guard in made:
            _record(spec, values, guard)
    return tuple(outs)


def _record(spec: tuple, args: tuple, guard: torch.Tensor | None) -> None:
    """Add one deferred call to the epilogue of the export in progress, replayed when the
    graph output ``guard`` is true (None: always)."""
    from ..epilogue.entries import Arg, Entry
    from ..epilogue.record import current_recorder

    recorder = current_recorder()
    if recorder is None:
        raise RuntimeError("stitch: a branch with side effects was traced outside export")
    kind, _arm, options, where = spec
    index = None
    if guard is not None:
        index = recorder.take(guard)
    specs = [Arg("tensor", output=recorder.take(a)) if isinstance(a, torch.Tensor)
             else recorder.arg(a) for a in args]
    recorder.entries.append(Entry(kind, where, tuple(specs), dict(options), index))


def _probe_nested(site, predicate, true_fn, false_fn, operands, effects, log) -> tuple:
    """Nested in a branch that is probing its arms (Python, fake tensors): probe this one
    too, keep its layout for the trace (``NESTED_LAYOUTS``), and log its calls, each with a
    guard, in the enclosing arm's log as the trace will."""
    outputs, entries = _probed(true_fn, false_fn, operands, effects)
    NESTED_LAYOUTS[(site, len(log))] = (
        _layout(entries), {arm: tuple(len(args) for _s, args, _g in entries[arm])
                           for arm in entries})
    guard = torch.zeros((), dtype=torch.bool, device=predicate.device)
    for arm in (True, False):
        log.extend((spec, args, guard) for spec, args, _g in entries[arm])
    return tuple(outputs[True])


def _traced_nested(site, predicate, true_fn, false_fn, operands, log) -> tuple:
    """Nested in a branch whose arm torch.cond is tracing (Dynamo): the cond, with the layout
    its probe found; the calls go to the enclosing arm's log with their guards (its tensors
    by position; the enclosing branch reads only those)."""
    layout, sizes = NESTED_LAYOUTS[(site, len(log))]
    marked = mark(site, predicate)
    result = _unaliased(lambda: torch.cond(
        marked, _arm_fn(True, true_fn, layout, predicate.device),
        _arm_fn(False, false_fn, layout, predicate.device), tuple(operands)))
    n_out = len(result) - len(layout) - 1
    outs, tensors, flag = result[:n_out], result[n_out:-1], result[-1]
    by_position = {(a, i, j): t for (a, i, j, _m), t in zip(layout, tensors, strict=True)}
    for arm in (True, False):
        arm_flag = flag if arm else torch.logical_not(flag)
        for i, n_args in enumerate(sizes[arm]):
            args = tuple(by_position.get((arm, i, j)) for j in range(n_args))
            inner = by_position.get((arm, i, -1))
            log.append((None, args, arm_flag if inner is None
                        else torch.logical_and(arm_flag, inner)))
    return tuple(outs)


def effect_options(kind: str, **values: Any) -> dict:
    """JSON options of a deferred call, from the objects at the call site. An append's
    target is the list's path when stitch is recording it (export), else the list itself
    (eager runs append to it directly; ``cond_effects`` refuses to record that)."""
    import sys as _sys

    if kind == "append":
        target = values["target"]
        path = getattr(target, "target", None)
        return {"target": path} if path is not None else {"list": target}

    if kind == "print":
        file = values.get("file")
        if file is not None and file not in (_sys.stdout, _sys.stderr):
            raise RuntimeError("stitch: print to a file object inside a branch cannot be deferred")
        return {"sep": values.get("sep", " ") if values.get("sep") is not None else " ",
                "end": values.get("end", "\n") if values.get("end") is not None else "\n",
                "stream": "stderr" if file is _sys.stderr else "stdout"}
    if kind == "log":
        return {"logger": values["logger"].name, "method": values["method"]}
    category = values.get("category") or UserWarning
    return {"category": f"{category.__module__}.{category.__qualname__}",
            "filename": values["filename"], "lineno": values["lineno"],
            "module": values.get("module", "")}


GUARD_ERROR = "SpecializationError"
# Helpers that run a rewritten construct as Python under torch.compile by design (a branch
# with side effects: export makes it a cond, Dynamo breaks on it). Dynamo sometimes names
# a line outside the user's function for such a break (inside a resume function after an
# earlier break; even a line of the function that called stitch.export), so the census
# site is recognised by the helper it stopped in.
RUNS_IN_PYTHON = frozenset({f"{__file__}:cond_effects"})


def guard(site: str, predicate: Any, side: bool, encoded: str) -> None:
    """The model was specialised to one side of ``if predicate``: refuse the other side."""
    if isinstance(predicate, torch.Tensor):
        ok = pred(predicate) if side else torch.logical_not(pred(predicate))
        _checked(site, ok, GUARD_ERROR, encoded)
        return
    if bool(predicate) != side:
        from ..errors import SpecializationError

        raise SpecializationError(unquote(encoded))


def guarded_value(site: str, predicate: Any, side: bool, encoded: str,
                  value: Callable[[], Any]) -> Any:
    guard(site, predicate, side, encoded)
    return value()
