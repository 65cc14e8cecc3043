"""Compare the stitched program with eager: outputs, buffers, and printed/logged/warned text.

Every example input runs through the original model (a fresh copy) and the program; then
each synthesized ``cond`` whose predicate the examples took only one way is forced the
other way, in the exported graph (its predicate replaced by a constant) and in the model's
own code (``forced.py``). Any difference raises ``VerificationError``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.utils._pytree as pytree

from capture import torch_messages as tm
from capture.inputs import Example
from capture.isolation import model_copy
from capture.reachable import restore, snapshot

from ..epilogue.targets import SHARED, is_shared
from ..errors import SpecializationError, VerificationError
from .hints import guard_hint, reshaped_buffer_hint, structure_hint, tolerance_hint
from .observe import Appends, Check, Observed, observe
from .state import attribute_readings, changed_attributes, compared


def _kind(value) -> str:
    return "a tensor" if isinstance(value, torch.Tensor) else f"the {type(value).__name__}"


def compare(what: str, expected: Observed, actual: Observed, rtol=None, atol=None,
            buffers: tuple[dict, dict] | None = None, kinds: bool = False) -> Check:
    """``kinds``: the reference is the model itself, so a Python number where it gave a
    tensor (or the reverse, or an int where it gave a float) is a difference; a forced
    side's reference runs the rewritten code, where a number may still be a 0-d tensor."""
    if expected.error is not None or actual.error is not None:
        if type(expected.error) is type(actual.error) and expected.error is not None:
            return Check(what, 0, 0, 0.0, f"both raised {type(expected.error).__name__}")
        raise VerificationError(
            f"{what}: the model {_outcome(expected)} but the stitched program "
            f"{_outcome(actual)}{guard_hint(actual.error)}",
            raised=actual.error if expected.error is None else None)
    leaves_e, spec_e = pytree.tree_flatten(expected.result)
    leaves_a, spec_a = pytree.tree_flatten(actual.result)
    if spec_e != spec_a:
        raise VerificationError(f"{what}: output structure differs:\n model: {spec_e}\n "
                                f"stitched: {spec_a}")
    worst = 0.0
    for i, (e, a) in enumerate(zip(leaves_e, leaves_a, strict=True)):
        if kinds and (isinstance(e, torch.Tensor) != isinstance(a, torch.Tensor) or (
                type(e) in (bool, int, float) and type(e) is not type(a))):
            raise VerificationError(
                f"{what}: output leaf {i} is {_kind(a)} {a!r}, eager gave {_kind(e)} {e!r}: "
                "Python's rules for what follows differ by kind")
        if isinstance(e, torch.Tensor):
            if isinstance(a, bool | int | float) and e.dim() == 0:
                # a forced side's reference runs the rewritten code, where a number the
                # branch returns is still a 0-d tensor; the program gives the number
                a = torch.tensor(a, dtype=e.dtype, device=e.device)
            try:
                torch.testing.assert_close(a, e, rtol=rtol, atol=atol, equal_nan=True)
            except AssertionError as err:
                raise VerificationError(f"{what}: output leaf {i} differs from eager: {err}"
                                        f"{tolerance_hint(a, e)}") from None
            if e.numel() and e.is_floating_point():
                worst = max(worst, (a.double() - e.double()).abs().max().item())
        elif e != a and not _both_nan(e, a):  # nan != nan, yet the same number
            raise VerificationError(f"{what}: output leaf {i} is {a!r}, eager gave {e!r}")
    for label, exp, act in (("printed (stdout)", expected.stdout, actual.stdout),
                            ("printed (stderr)", expected.stderr, actual.stderr),
                            ("logged", expected.logs, actual.logs),
                            ("warned", expected.warnings, actual.warnings)):
        if exp != act:
            raise VerificationError(f"{what}: {label} text differs:\n model: {exp!r}\n "
                                    f"stitched: {act!r}")
    for target, want in expected.appended.items():
        got = actual.appended.get(target, [])
        if not _same_items(got, want, rtol, atol):
            raise VerificationError(f"{what}: the values appended to {target!r} differ:\n "
                                    f"model: {want!r}\n stitched: {got!r}")
    for target, want in expected.rebound.items():
        got = actual.rebound.get(target)
        leaves_w, spec_w = pytree.tree_flatten(want)
        leaves_g, spec_g = pytree.tree_flatten(got)
        if spec_w != spec_g or not _same_items(leaves_g, leaves_w, rtol, atol):
            raise VerificationError(f"{what}: {target!r} holds another value after the call "
                                    f"than the model's (set on every call by the forward, "
                                    f"by the epilogue in the program):\n model: "
                                    f"{_brief(want)}\n stitched: {_brief(got)}")
    for i, (e, a) in enumerate(zip(expected.inputs_after, actual.inputs_after, strict=True)):
        try:
            torch.testing.assert_close(a, e, rtol=rtol, atol=atol, equal_nan=True)
        except AssertionError as err:
            raise VerificationError(f"{what}: input tensor {i}, written in place by the "
                                    f"forward, holds other values after the stitched program: "
                                    f"{first_line(str(err))}") from None
    if buffers is not None:
        for name, value in buffers[0].items():  # one the epilogue sets: in `rebound`, above
            other = buffers[1].get(name)
            if name not in expected.rebound and (other is None or not torch.equal(value, other)):
                raise VerificationError(f"{what}: buffer {name} differs after the call")
    tensors = sum(isinstance(x, torch.Tensor) for x in leaves_e)
    return Check(what, tensors, expected.texts, worst)


def first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def _same_items(got: list, want: list, rtol, atol) -> bool:
    if len(got) != len(want):
        return False
    for a, e in zip(got, want, strict=True):
        if isinstance(e, torch.Tensor) and isinstance(a, torch.Tensor):
            try:
                torch.testing.assert_close(a, e, rtol=rtol, atol=atol, equal_nan=True)
            except AssertionError:
                return False
        elif isinstance(e, torch.Tensor) or isinstance(a, torch.Tensor) or (
                a != e and not _both_nan(e, a)):  # an appended NaN is the same NaN
            return False
    return True


def _brief(value) -> str:
    """A value's structure, tensors by dtype and shape (no tensor printouts in messages)."""
    return str(pytree.tree_map_only(
        torch.Tensor, lambda t: f"tensor{tuple(t.shape)}:{str(t.dtype).removeprefix('torch.')}",
        value))[:300]


def _outcome(seen: Observed) -> str:
    if seen.error is not None:
        return f"raised {type(seen.error).__name__}: {seen.error}"
    return "returned normally"


def verify(reference: torch.nn.Module | Callable, program_call: Callable,
           program_buffers: Callable[[], dict], inputs: list[Example], settings,
           forced: list[tuple[str, bool, Callable, Callable]] = (),
           appends: Appends | None = None, state: list = (), tensors: list[str] = (),
           forced_on: Example | None = None, skip_refused: bool = False) -> list[Check]:
    """Examples first (sequence preserved, so buffer updates compound the same way), then
    forced branches (each on a fresh copy: ``forced`` holds (site, side, eager_fn, graph_fn),
    each fn with an ``appends`` attribute where the epilogue appends). ``appends`` says
    where the program's appends go; the reference's are read from its list attributes.
    ``state`` holds the slots outside the model (class attributes, module globals, closure
    cells) both sides must leave alike, on every example and forced side. ``tensors``: plain
    tensor attributes of the model (paths) the program keeps as buffers, compared as
    buffers. ``forced_on``: the input every forced side runs on (a size probe), instead of
    the example each was made for. ``skip_refused``: an example the model raises on owes
    nothing (a size probe it refuses): no check, and the program is not run on it."""
    model = model_copy(reference) if isinstance(reference, torch.nn.Module) else reference
    stateful = isinstance(model, torch.nn.Module)
    checks = []
    first = None  # the model's run on the first example (the one traced)
    for i, ex in enumerate(inputs):
        before = ({k: v.detach().clone() for k, v in _buffers(model, tensors)}
                  if stateful else {})
        attributes = attribute_readings(model) if stateful else {}
        expected, actual, same_state = compared(
            state, lambda ex=ex: observe(model, ex, appends and Appends.in_model(
                appends.targets, lambda: model, appends.rebound)),
            lambda ex=ex: observe(program_call, ex, appends),
            (lambda seen: seen.error is None) if skip_refused else None)
        if actual is None:  # the model refuses this input itself: nothing owed
            continue
        if isinstance(actual.error, SpecializationError):
            # a guarded site: the program refuses this input by design, and says so. The
            # program's state did not move; put the reference's back so later examples
            # compare like with like
            with torch.no_grad():
                for name, value in before.items():
                    _buffer(model, name).copy_(value)
            checks.append(Check(ex.name(i), 0, 0, 0.0,
                                "refused by a guard (takes a specialised-away branch)",
                                refused=True))
            continue
        ref_buffers = ({k: v.detach().clone() for k, v in _buffers(model, tensors)}
                       if stateful else {})
        got = program_buffers()
        buffers = (ref_buffers, {k.removeprefix("model."): v for k, v in got.items()})
        try:
            checks.append(compare(ex.name(i), expected, actual, settings.rtol, settings.atol,
                                  buffers if ref_buffers else None, kinds=True))
        except VerificationError as e:  # an output structure per input, a reshaped buffer
            hint = ((structure_hint(first, expected) if e.raised is not None else "")
                    or reshaped_buffer_hint(model, buffers))
            if not hint:
                raise
            raise VerificationError(f"{e}{hint}", e.raised, e.size_test) from None
        first = expected if i == 0 else first
        same_state(ex.name(i), settings.rtol, settings.atol)
        if stateful and expected.error is None:
            # a one-time initialisation (None, or missing, until the first call) is no state;
            # an attribute holding a list outside the model whose appends are compared
            # (``self.log = LOG``) is compared as those appends
            after = attribute_readings(model)
            _unreplayed(ex.name(i), [a for a in changed_attributes(
                attributes, after, {*tensors, *settings.unchecked_state,
                                    *(appends.targets if appends else ()),
                                    *(appends.rebound if appends else ())})
                if attributes.get(a, (("value", None),))[0] != ("value", None)
                and id(after.get(a, (None, None))[1]) not in _shared_lists(appends)])
    for site, side, eager_fn, graph_fn in forced:
        k = getattr(graph_fn, "example", 0)
        ex = inputs[k] if forced_on is None else forced_on
        within = getattr(graph_fn, "within", "")
        start = snapshot(state)

        def pair(e=eager_fn, g=graph_fn, ex=ex):
            return compared(state, lambda: observe(e, ex, getattr(e, "appends", None)),
                            lambda: observe(g, ex, getattr(g, "appends", None)))

        expected, actual, same_state = pair()
        assumed = _assumed_away(expected, actual)
        if assumed and getattr(eager_fn, "fallback", None) is not None:
            # the model, forced, ran a state the arm's own facts exclude (the test implies
            # them): no input reaches it; compare with the rewrite forced, as the report says
            for fn in (eager_fn, graph_fn):  # let this run's copies go
                getattr(fn, "buffers", dict)()
            eager_fn.against, eager_fn.why = "rewrite", (
                f"the program's arm asserts {assumed}, which its test implies and forcing "
                "the model contradicts")
            eager_fn = eager_fn.fallback
            restore(start)
            expected, actual, same_state = pair(eager_fn)
        buffers = ((eager_fn.buffers(), graph_fn.buffers())
                   if hasattr(eager_fn, "buffers") and hasattr(graph_fn, "buffers") else None)
        what = f"{site} forced {'true' if side else 'false'}" + (
            f" (within {within})" if within else "")
        try:
            checks.append(compare(what, expected, actual, settings.rtol, settings.atol,
                                  buffers))
        except VerificationError as e:
            size_test = getattr(graph_fn, "size_test", "")
            if not size_test:
                raise
            raise VerificationError(
                f"{e}\n{site} tests sizes ({size_test}), and no example takes this side: "
                f"forced on {f'example {k}' if forced_on is None else 'a cut example'}, "
                "whose sizes say otherwise, the program's arm (traced "
                "knowing its test holds) meets sizes no input can give it, so this run is "
                "no evidence either way. What you can do: add an example that takes this "
                "side.", raised=e.raised, size_test=size_test) from None
        if expected.error is None:
            # where both raise alike, the state the model changed before raising is not
            # compared: a program that fails leaves the effects before the failure unmade
            # (docs/guarantees.md, failing inputs)
            same_state(what, settings.rtol, settings.atol)
        _unreplayed(what, getattr(eager_fn, "changed", ()))
    return checks


def _assumed_away(expected: Observed, actual: Observed) -> str:
    """The fact a forced program run failed on (``Ne(u2, 0)``), where the model returned:
    a runtime assertion the arm carries from its test, which forcing contradicts."""
    text = str(actual.error) if actual.error is not None else ""
    found = tm.search(tm.RUNTIME_ASSERTION, text)
    if expected.error is not None or found is None:
        return ""
    return found.group(1)


def _unreplayed(what: str, changed) -> None:
    """Refuse when a run of the model changed attributes the program does not replay."""
    if not changed:
        return
    forced = "forced" in what
    raise VerificationError(
        f"{what}: {'on this side ' if forced else ''}the forward changes model "
        f"attribute(s) {', '.join(repr(c) for c in changed)}, "
        + ("which no example showed it changing" if forced else
           "in a way stitch's measurement of the examples did not catch") +
        ", so the program does not replay them (torch.export drops Python state). What you "
        "can do: " + ("add an example that takes this branch, " if forced else "") +
        "keep the value in a buffer (register_buffer), or return it.")


def _buffers(model: torch.nn.Module, tensors: list[str]) -> list[tuple[str, torch.Tensor]]:
    """The model's buffers and the plain tensor attributes at ``tensors`` (recurrent state
    the program keeps as buffers), by path."""
    return [*model.named_buffers(), *((t, _buffer(model, t)) for t in tensors)]


def _buffer(model: torch.nn.Module, path: str) -> torch.Tensor:
    owner, _, name = path.rpartition(".")
    return getattr(model.get_submodule(owner), name)


def _both_nan(e, a) -> bool:
    """Two float NaNs: the same result (Python's ``nan != nan`` refused a right program)."""
    return (type(e) is float and type(a) is float and e != e and a != a)


def _shared_lists(appends) -> set[int]:
    """Ids of the lists outside the model (class, global, closure) whose appends are
    compared."""
    if not appends:
        return set()
    return {id(SHARED[t].get()) for t in appends.targets if is_shared(t) and t in SHARED}
