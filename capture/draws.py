"""Random numbers a forward draws outside torch: Python's ``random``, numpy's global generator.

torch.export evaluates such a draw once, while tracing: the program returns that number on
every call and leaves the generator where it was. Two cases, told apart by running each
example from two different generator states (torch's own left alike):

- the outputs and text change: the draw matters (``if random.random() < 0.5``) and no
  graph can hold it: refused, naming each line;
- they do not (transformers' LayerDrop draws ``np.random.uniform(0, 1)`` on every call and
  uses it only in training, VITS, MusicGen): the draw is dead, and replaying the same calls
  after the graph advances the generator exactly as eager does.

Draws are seen by wrapping the generators' functions while a run goes on (code looks them
up on the module at each call: ``random.random()``, ``np.random.uniform(0, 1)``).
"""

from __future__ import annotations

import contextlib
import copy
import io
import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import torch

GENERATORS = {"random": "Python's `random`", "numpy.random": "numpy's global generator "
              "(`np.random`)"}
_FUNCTIONS = ("random", "uniform", "randint", "randrange", "choice", "choices", "shuffle",
              "sample", "gauss", "normalvariate", "getrandbits", "rand", "randn",
              "random_sample", "permutation", "normal", "integers", "standard_normal",
              "binomial", "poisson", "beta", "exponential",
              "seed")  # not a draw, but it moves the generator: replayed in order too
_JSON = (bool, int, float, str, type(None))


@dataclass(frozen=True)
class Draw:
    """One call that drew a number: where, which function, with which arguments."""

    location: str  # file:line of the call
    module: str  # "random" or "numpy.random"
    name: str
    args: tuple
    replayable: bool  # plain-value arguments, no keywords: the same call can be made again
    value: object = None  # what it returned (a dead draw's stand-in while stitch traces)


def states() -> dict[str, object]:
    """Where each generator stands (comparable values)."""
    out: dict[str, object] = {"random": random.getstate()}
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        _, keys, pos, gauss, cached = numpy.random.get_state()
        out["numpy.random"] = (keys.tobytes(), pos, gauss, cached)
    return out


def _owners() -> list:
    numpy = sys.modules.get("numpy")
    return [random] + ([numpy.random] if numpy is not None else [])


@contextlib.contextmanager
def recorded() -> Iterator[list[Draw]]:
    """The draws made while the context runs, in order."""
    calls: list[Draw] = []
    undo = []

    def wrapped(owner, name, fn):
        def draw(*args, **kwargs):
            caller = sys._getframe(1)
            value = fn(*args, **kwargs)
            calls.append(Draw(f"{caller.f_code.co_filename}:{caller.f_lineno}",
                              owner.__name__, name, args,
                              not kwargs and all(type(a) in _JSON for a in args), value))
            return value
        return draw

    try:
        for owner in _owners():
            for name in _FUNCTIONS:
                fn = vars(owner).get(name)
                if callable(fn):
                    undo.append((owner, name, fn))
                    setattr(owner, name, wrapped(owner, name, fn))
        yield calls
    finally:
        for owner, name, fn in undo:
            setattr(owner, name, fn)


def _seeded(seed: int) -> None:
    random.seed(seed)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed)


def _outcome(module, example) -> tuple:
    text = io.StringIO()
    with contextlib.redirect_stdout(text), contextlib.redirect_stderr(text):
        out = module(*example.args, **example.kwargs)
    leaves = torch.utils._pytree.tree_leaves(out)
    return [v.detach().clone() if isinstance(v, torch.Tensor) else v for v in leaves], \
        text.getvalue()


def _same(a: tuple, b: tuple) -> bool:
    (la, ta), (lb, tb) = a, b
    return ta == tb and len(la) == len(lb) and all(
        isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.shape == y.shape
        and x.dtype == y.dtype and torch.equal(x, y) if isinstance(x, torch.Tensor)
        else type(x) is type(y) and x == y for x, y in zip(la, lb, strict=True))


def dead_draws(model, examples) -> tuple[list[Draw], str]:
    """The draws each example makes, when none changes what the forward returns or prints
    and every example makes the same ones (they can be replayed after the graph); else
    ``([], why)``. Each run starts from a copy of ``model`` and torch's generator state."""
    per_example: list[list[Draw]] = []
    torch_state = torch.get_rng_state()
    for example in examples:
        outcomes = []
        for seed in (1234, 98765):
            _seeded(seed)
            torch.set_rng_state(torch_state)
            with recorded() as calls:
                outcomes.append(_outcome(copy.deepcopy(model), example))
        if not _same(*outcomes):
            return [], "what the forward returns or prints changes with the numbers drawn"
        per_example.append(calls)
    torch.set_rng_state(torch_state)
    shapes = {tuple((d.location, d.module, d.name, d.args) for d in calls)
              for calls in per_example}
    if len(shapes) > 1:
        return [], "the examples make different draws (how many, or with which arguments)"
    draws = per_example[0] if per_example else []
    if not all(d.replayable for d in draws):
        return [], "a draw takes arguments the epilogue cannot make again (objects, keywords)"
    return draws, ""
