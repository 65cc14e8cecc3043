"""What the library suites of the sweep share (diffusers, timm, ultralytics, pyg, kornia).

Each suite is a module ``sweep_<suite>.py`` with ``architectures()`` (name -> family, for
the listing) and ``build(name)``, which returns a ``Built``: the model (random weights,
eval mode) and its examples, example 0 first. Examples some models refuse by design
(another image size for a model of a fixed one; a second image for a detector of one) are
marked optional: ``build`` here runs them eagerly and drops those the model refuses,
naming why; the others go to the eager stage as they are. The network is closed while a model is built and run: a library that tries to
download weights or fonts fails its build with the address it asked for.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import socket
import warnings
from dataclasses import dataclass, field

import torch
from sweep_hf import BuildError

SUITES = ("diffusers", "timm", "ultralytics", "pyg", "kornia")
# the distribution each suite's version is read from, in the listing
PACKAGES = {"diffusers": "diffusers", "timm": "timm", "ultralytics": "ultralytics",
            "pyg": "torch_geometric", "kornia": "kornia"}
MAX_PARAMS = 30_000_000  # a "small" variant larger than this is not built (named)

Example = tuple[tuple, dict]


@dataclass
class Built:
    model: torch.nn.Module
    examples: list[Example]  # example 0 first; each runs in the eager stage
    optional: list[Example] = field(default_factory=list)  # kept where eager runs them


def module(suite: str):
    return importlib.import_module(f"sweep_{suite}")


def versions(suite: str) -> str:
    module(suite)  # first: a suite module may set the library's environment before import
    lib = importlib.import_module(PACKAGES[suite])
    return f"torch {torch.__version__}, {suite} {lib.__version__}"


class NetworkClosed(OSError):
    """A library asked for the network while the sweep builds or runs its model."""


_asked: list[str] = []


def close_network() -> list[str]:
    """Every later connection or name lookup raises ``NetworkClosed``; returns the list the
    addresses asked for are appended to (the build record keeps it)."""
    def refuse(address):
        _asked.append(str(address))
        raise NetworkClosed(f"the sweep closes the network; asked for {address}")

    socket.socket.connect = lambda self, address: refuse(address)
    socket.getaddrinfo = lambda host, *a, **k: refuse(host)
    socket.create_connection = lambda address, *a, **k: refuse(address)
    return _asked


def eager(model, example: Example):
    args, kwargs = example
    torch.manual_seed(0)
    with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model(*args, **kwargs)


def describe(example: Example) -> str:
    """``x=[1x3x64x64] t=[1] scale=0.5``: each input's shape (a tensor) or value."""
    from torch.utils._pytree import tree_leaves

    args, kwargs = example
    parts = []
    for key, value in [*enumerate(args), *kwargs.items()]:
        leaves = tree_leaves(value)
        shapes = [f"[{'x'.join(map(str, t.shape))}]" if isinstance(t, torch.Tensor)
                  else repr(t) for t in leaves]
        parts.append(f"{key}={','.join(shapes) if len(shapes) <= 6 else f'{len(shapes)} items'}")
    return " ".join(parts)


def params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def construct(make, *args, max_params: int = MAX_PARAMS, **kwargs):
    """``make(*args, **kwargs)`` seeded, in eval mode, its failure a ``BuildError``; a model
    over ``max_params`` parameters is refused too (the sweep runs small models)."""
    torch.manual_seed(0)
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = make(*args, **kwargs)
    except BuildError:
        raise
    except Exception as e:
        raise BuildError(f"construct: {type(e).__name__}: {str(e).splitlines()[0][:200]}") \
            from e
    if params(model) > max_params:
        raise BuildError(f"{params(model) / 1e6:.1f}M parameters, over the sweep's "
                         f"{max_params // 10**6}M")
    return model.eval()


def build(suite: str, name: str, rec: dict) -> tuple[torch.nn.Module, tuple, dict,
                                                     list[Example]]:
    """(model, args, kwargs, further examples) for the worker; ``rec`` gets the class, the
    examples kept, those dropped with why, and any network address asked for."""
    asked = close_network()
    built = module(suite).build(name)
    kept = list(built.examples)
    dropped = {}
    for example in built.optional:
        try:
            eager(built.model, example)
            kept.append(example)
        except Exception as e:
            dropped[describe(example)] = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:160]}"
    rec.update({"class": type(built.model).__name__, "examples": list(map(describe, kept)),
                "dropped": dropped, "network": list(asked)})
    (args, kwargs), *more = kept
    return built.model, args, kwargs, more


def images(channels: int, sizes: list[tuple[int, int, int]], seed: int = 0,
           low: float = 0.0) -> list[torch.Tensor]:
    """One (batch, channels, height, width) tensor in [low, 1) per size (batch, h, w)."""
    g = torch.Generator().manual_seed(seed)
    return [low + (1 - low) * torch.rand(b, channels, h, w, generator=g) for b, h, w in sizes]
