"""Export one form with stitch and compare its program with eager on every side.

For each form (``tests/forms/generate.py``) the module is written to a file and imported, so
stitch reads its source as it reads a user's. Its recording copy runs eager on the candidate
inputs; the examples are the fewest non-raising candidates that take every side any of them
takes, and the held-out inputs are all candidates of two draws (those that raise included)
whose sizes fit the examples (a size every example shares is static in the program).

Outcomes, one per form:

- ``exact``: ``stitch.export`` returned a program equal to eager on every held-out input:
  outputs (tensors by ``assert_close``, NaN equal to NaN; Python numbers by kind and value),
  printed text, logged messages, warnings carrying the form's tag, the state the form
  changes (its holder's ``n``, ``seen``, ``h``; the module's ``HISTORY`` and ``STATS``), and
  on an input eager raises on, the exception's class (effects before a raise are not compared:
  docs/guarantees.md, known limits).
- ``refused``: a ``StitchError`` stitch raised on purpose; ``located`` records whether its
  message names a line of the form's file (``form_<id>_<n>.py:<line>``), as every refusal
  should (docs/guarantees.md: it names every place it could not handle).
- ``mismatch``: a program that differs from eager (raising where eager returns counts), or
  an export that left the model's state changed.
- ``narrowed``: equal to eager wherever the program answers, but it raises torch's own
  guard (``Guard failed``, ``Runtime assertion failed``) on some held-out input eager
  accepts (or raises another exception on): a loud specialisation (docs/guarantees.md, shapes and guards), not a wrong value.
- ``internal``: any exception from ``stitch.export`` that is not a ``StitchError``, or an
  ``ExportFailedError`` ("torch.export refused the rewritten model: <torch's message>") that
  names no line of the form's file: stitch's own rewrite failed, and the user reads torch's
  trace, not a refusal they can act on.
- ``timeout``: no answer within the limit. ``invalid``: the form's eager model fails on
  every candidate (a generator bug, not stitch's).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import itertools
import logging
import math
import os
import re
import signal
import sys
import time
import traceback
import warnings
from dataclasses import asdict, dataclass, field

import torch

import stitch
from tests.forms.generate import Form, inputs, source, state_holder

# the dimension a shape test reads: the examples differ in it, so it is dynamic
SIZE_TESTED = {"shape0": (0,), "shape1-mod": (1,), "shape-or": (0, 1), "shape-any": (0, 1),
               "shape-list": (0, 1)}

MAX_EXAMPLES = 4
_COUNTER = itertools.count()


class FormTimeout(BaseException):
    """Raised by the alarm: a BaseException, so no ``except Exception`` in stitch swallows it."""


@dataclass
class Result:
    name: str
    id: str
    construct: str
    position: str
    predicate: str
    carry: str
    effect: str
    outcome: str = ""
    error_type: str = ""
    message: str = ""  # first line of the error or the mismatch
    reason: str = ""  # the refusal's or error's message, normalised for grouping
    located: bool = False  # the error names a line of the form's file
    where: str = ""  # the innermost stitch/capture frame of an internal error
    sides_covered: bool = False  # every test took both sides over examples and held-out
    examples: int = 0
    held_out: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


# -- loading and choosing inputs -------------------------------------------------------

def load(form: Form, directory: str, sides: bool = False):
    """Write the form's module (or its recording copy) to a file and import it."""
    name = f"form_{form.id}{'_sides' if sides else ''}_{next(_COUNTER)}"
    path = os.path.join(directory, name + ".py")
    with open(path, "w") as f:
        f.write(source(form, sides=sides))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # as an import does: its globals reachable by module name
    spec.loader.exec_module(module)
    return module


def _quietly(fn, *args):
    """``fn(*args)`` with stdout, logs and warnings kept from the terminal: (value, error)."""
    logger = logging.getLogger("forms")
    dropped = logging.NullHandler()  # else logging's last resort prints to stderr
    logger.addHandler(dropped)
    propagate, logger.propagate = logger.propagate, False
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings(), \
                torch.no_grad():
            warnings.simplefilter("ignore")
            try:
                return fn(*args), None
            except Exception as e:  # noqa: BLE001 - the caller classifies it
                return None, e
    finally:
        logger.removeHandler(dropped)
        logger.propagate = propagate


def choose(form: Form, directory: str) -> tuple[list, list, bool]:
    """(examples, held-out inputs, whether every test takes both sides over them).

    A form that tests a size gets two examples that differ in it (where a candidate that
    does not raise has another size): one example would make the size a constant."""
    module = load(form, directory, sides=True)
    tests = source(form, sides=True).count("_side(") - 1  # less the definition
    candidates = inputs(form, seed=1)
    taken, raises = [], []
    for x in candidates:
        module.SIDES.clear()
        _, error = _quietly(module.Form(), x.clone())
        taken.append(set(module.SIDES))
        raises.append(error is not None)
    ok = [i for i, r in enumerate(raises) if not r]
    examples: list[int] = []
    wanted = set().union(*(taken[i] for i in ok)) if ok else set()
    got: set = set()
    while got != wanted and len(examples) < MAX_EXAMPLES:
        best = max(ok, key=lambda i: (len(taken[i] - got), -i))
        examples.append(best)
        got |= taken[best]
    if not examples and ok:
        examples = [ok[0]]
    for dim in SIZE_TESTED.get(form.predicate, ()):
        other = [i for i in ok if examples
                 and candidates[i].shape[dim] != candidates[examples[0]].shape[dim]]
        if other and len({candidates[i].shape[dim] for i in examples}) == 1:
            examples.append(other[0])  # the tested size differs: a dynamic dimension
    seen = got.union(*(taken[i] for i, r in enumerate(raises) if r))
    covered = all((t, side) in seen for t in range(1, tests + 1) for side in (True, False))
    chosen = [candidates[i] for i in examples]
    held = [x for x in candidates + inputs(form, seed=2) if _fits(x, chosen)]
    return chosen, held, covered


def _fits(x: torch.Tensor, examples: list) -> bool:
    """A size every example shares is static in the program: other sizes are not asked."""
    if not examples:
        return False
    return all(len({e.shape[d] for e in examples}) > 1 or x.shape[d] == examples[0].shape[d]
               for d in range(x.dim()))


# -- one call, compared ----------------------------------------------------------------

class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(f"{record.levelname}:{record.getMessage()}")


@dataclass
class Call:
    value: object
    error: BaseException | None
    text: str
    logs: list[str]
    warned: list[str]


def call(fn, x: torch.Tensor, tag: str) -> Call:
    """Run ``fn(x)`` and keep what it returned or raised, printed, logged and warned."""
    logger = logging.getLogger("forms")
    records = _Records()
    logger.addHandler(records)
    propagate, logger.propagate = logger.propagate, False
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), warnings.catch_warnings(record=True) as caught, \
                torch.no_grad():
            warnings.simplefilter("always")
            try:
                value, error = fn(x.clone()), None
            except Exception as e:  # noqa: BLE001 - compared with eager's
                value, error = None, e
    finally:
        logger.removeHandler(records)
        logger.propagate = propagate
    warned = [f"{w.category.__name__}:{w.message}" for w in caught if tag in str(w.message)]
    return Call(value, error, out.getvalue(), records.messages, warned)


def differs(a, b, where: str = "output") -> str | None:
    """Why ``b`` (the program's) is not ``a`` (eager's), or None when they are the same."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return f"{where}: {type(b).__name__} where eager gave {type(a).__name__}"
        try:
            torch.testing.assert_close(b, a, equal_nan=True)
        except AssertionError as e:
            return f"{where}: {str(e).splitlines()[0]}"
        return None
    if type(a) is not type(b):
        return f"{where}: {type(b).__name__} where eager gave {type(a).__name__}"
    if isinstance(a, list | tuple):
        if len(a) != len(b):
            return f"{where}: {len(b)} items where eager gave {len(a)}"
        return next((d for i, (u, v) in enumerate(zip(a, b, strict=True))
                     if (d := differs(u, v, f"{where}[{i}]"))), None)
    if isinstance(a, dict):
        if a.keys() != b.keys():
            return f"{where}: keys {sorted(b)} where eager gave {sorted(a)}"
        return next((d for k in a if (d := differs(a[k], b[k], f"{where}[{k!r}]"))), None)
    if isinstance(a, float) and math.isnan(a) and math.isnan(b):
        return None
    if isinstance(a, float) and math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6):
        return None
    return None if a == b else f"{where}: {b!r} where eager gave {a!r}"


def state(form: Form, module, model) -> dict:
    holder = state_holder(form, model)
    return {"n": holder.n, "seen": list(holder.seen), "h": holder.h,
            "HISTORY": list(module.HISTORY), "STATS": dict(module.STATS)}


def _put(form: Form, module, model, values: dict) -> None:
    """Set the state ``state`` reads, in place where the program holds the object."""
    holder = state_holder(form, model)
    holder.n, holder.h = values["n"], values["h"]
    holder.seen[:] = values["seen"]
    module.HISTORY[:] = values["HISTORY"]
    module.STATS.clear()
    module.STATS.update(values["STATS"])


def compare(form: Form, module, exported, program, held: list,
            narrowed: list | None = None) -> str | None:
    """The first way the program differs from a fresh eager model, or None. An input the
    program refuses with torch's own size or value guard (``GUARD``) is put on ``narrowed``
    instead: it accepts fewer inputs, loudly (docs/guarantees.md, shapes and guards)."""
    eager = module.Form()
    tag = f"f{form.id}"
    for i, x in enumerate(held):
        before = state(form, module, eager)
        want = call(eager, x, tag)
        after = state(form, module, eager)
        _put(form, module, exported, before)
        got = call(program, x, tag)
        now = state(form, module, exported)
        _put(form, module, exported, after)
        _put(form, module, eager, after)
        where = f"held-out input {i} {tuple(x.shape)}"
        if type(got.error) is not type(want.error):
            if got.error is not None and GUARD.search(str(got.error)):
                if narrowed is not None:
                    narrowed.append(f"{where}: {_first_line(got.error)}")
                continue
            return f"{where}: raised {got.error!r} where eager raised {want.error!r}"
        if want.error is not None:
            continue
        found = (differs(want.value, got.value)
                 or (None if got.text == want.text else
                     f"printed {got.text!r} where eager printed {want.text!r}")
                 or (None if got.logs == want.logs else
                     f"logged {got.logs!r} where eager logged {want.logs!r}")
                 or (None if got.warned == want.warned else
                     f"warned {got.warned!r} where eager warned {want.warned!r}")
                 or differs(after, now, "state"))
        if found:
            return f"{where}: {found}"
    return None


# torch's checks in an exported program: a size guard, a runtime assertion on a read value
GUARD = re.compile(r"Guard failed|Runtime assertion failed")


# -- one form --------------------------------------------------------------------------

def _first_line(error: BaseException) -> str:
    lines = [ln.strip() for ln in str(error).splitlines() if ln.strip()]
    return lines[0][:300] if lines else ""


def _reason(error: BaseException) -> str:
    """The error's message, normalised so that the same reason groups across forms."""
    lines = [ln for ln in str(error).splitlines()
             if "why not rewritten" in ln or ": specialised" in ln] or \
        [_first_line(error)]
    text = re.sub(r"\S+\.py:\d+", "<loc>", lines[0])
    text = re.sub(r"\bf[0-9a-f]{8}\b|form_[0-9a-f]{8}\w*", "<form>", text)
    text = re.sub(r"0x[0-9a-f]+", "<addr>", text)
    return f"{type(error).__name__}: {text.strip()[:300]}"


def _where(error: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if re.search(r"/(stitch|capture)/", f.filename) and "site-packages" not in f.filename]
    if not frames:
        return ""
    f = frames[-1]
    return f"{f.filename.split('/main/')[-1]}:{f.lineno} {f.name}"


def _on_alarm(signum, frame):
    raise FormTimeout()


def _classify(result: Result, error: BaseException, path: str) -> None:
    result.error_type = type(error).__name__
    result.message = _first_line(error)
    result.reason = _reason(error)
    result.located = re.search(re.escape(os.path.basename(path)) + r":\d+", str(error)) is not None
    passed_on = isinstance(error, stitch.ExportFailedError) and not result.located
    refused = isinstance(error, stitch.StitchError) and not passed_on
    result.outcome = "refused" if refused else "internal"
    if not refused:
        result.where = _where(error)


def run_form(form: Form, directory: str, timeout: int = 300) -> Result:
    """Export ``form`` (its module files written to ``directory``) and compare; never raises
    (but on KeyboardInterrupt)."""
    result = Result(form.name, form.id, form.construct, form.position, form.predicate,
                    form.carry, form.effect)
    started = time.time()
    examples, held, result.sides_covered = choose(form, directory)
    result.examples, result.held_out = len(examples), len(held)
    if not examples:
        result.outcome = "invalid"
        result.message = "eager raises on every candidate input"
        return result
    module = load(form, directory)
    path = module.__file__
    model = module.Form()
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(timeout)
    try:
        before = state(form, module, model)
        program, error = _quietly(lambda: stitch.export(
            model, (examples[0].clone(),),
            examples=[((x.clone(),), {}) for x in examples[1:]] or None))
        if error is not None:
            _classify(result, error, path)
            return result
        if differs(before, state(form, module, model), "state"):
            result.outcome, result.message = "mismatch", "stitch.export changed the model's state"
            return result
        narrowed: list[str] = []
        try:
            found = compare(form, module, model, program, held, narrowed)
        except Exception as e:  # noqa: BLE001 - the comparison itself failed: recorded
            _classify(result, e, path)
            result.outcome = "internal"
            return result
        result.outcome = "mismatch" if found else "narrowed" if narrowed else "exact"
        result.message = found or (narrowed[0] if narrowed else "")
        result.notes = narrowed
        if result.message:
            result.reason = re.sub(r"held-out input \d+ \([\d, ]*\): ", "",
                                   result.message)[:160]
        return result
    except FormTimeout:
        result.outcome, result.message = "timeout", f"no answer within {timeout} s"
        return result
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        result.seconds = round(time.time() - started, 1)
