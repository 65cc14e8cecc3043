"""Graph-break patterns. Each line where Dynamo breaks is marked ``# BREAK: <kind>``."""

from __future__ import annotations

import logging
import warnings

import torch
from torch import nn

logger = logging.getLogger("tests.zoo")


class Block(nn.Module):
    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        return torch.tanh(self.proj(x))


class BranchOnItem(nn.Module):
    """``if h.sum().item() > 0:`` — a scalar read feeding a branch."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.a, self.b = Block(width), Block(width)

    def forward(self, x):
        h = self.a(x)
        if h.sum().item() > 0:  # BREAK: branch
            h = h * 2
        else:
            h = h - 1
        return self.b(h)


class BranchOnTensor(nn.Module):
    """``if h.mean() > 0:`` — a tensor used as a Python bool."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.a, self.b = Block(width), Block(width)

    def forward(self, x):
        h = self.a(x)
        if h.mean() > 0:  # BREAK: branch
            out = self.b(h)
        else:
            out = -h
        return out


class FlagThenBranch(nn.Module):
    """``flag = h.any().item()`` then ``if flag:`` — the read and the branch apart."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.a, self.b = Block(width), Block(width)

    def forward(self, x):
        h = self.a(x)
        flag = (h.mean() > 0).item()  # BREAK: scalar_read
        if flag:
            h = h + self.b(h)
        return h


class PrintStats(nn.Module):
    """A ``print`` of a tensor value in the middle of forward."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.a, self.b = Block(width), Block(width)

    def forward(self, x):
        h = self.a(x)
        print("hidden mean:", h.mean())  # BREAK: side_effect
        return self.b(h)


class LogWarning(nn.Module):
    """A ``logging`` call with a tensor argument."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.a, self.b = Block(width), Block(width)

    def forward(self, x):
        h = self.a(x)
        logger.warning("hidden norm %.4f", h.norm())  # BREAK: side_effect
        return self.b(h)


class WarnsUser(nn.Module):
    """A ``warnings.warn`` call."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.a, self.b = Block(width), Block(width)

    def forward(self, x):
        h = self.a(x)
        warnings.warn("WarnsUser is deprecated", DeprecationWarning, stacklevel=1)  # BREAK: side_effect
        return self.b(h)


class AssertFinite(nn.Module):
    """A data-dependent ``assert`` that reads a scalar."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.a, self.b = Block(width), Block(width)

    def forward(self, x):
        h = self.a(x) + x
        assert h.abs().max().item() < 1e4, "activations overflowed"  # BREAK: assert
        return self.b(h)


class RaiseOnNan(nn.Module):
    """``if torch.isnan(h).any(): raise`` — a data-dependent check."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.a, self.b = Block(width), Block(width)

    def forward(self, x):
        h = self.a(x)
        if torch.isnan(h).any():  # BREAK: assert
            raise ValueError("NaN in hidden state")
        return self.b(h)


class TensorCountedLoop(nn.Module):
    """``for _ in range(int(n.item()))`` — a trip count read from a tensor."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.a = Block(width)

    def forward(self, x, n):
        h = x
        for _ in range(int(n.item())):  # BREAK: loop
            h = self.a(h)
        return h


class HalveUntilSmall(nn.Module):
    """``while h.abs().max() > 1:`` — a loop that runs until the data says stop."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.a, self.b = Block(width), Block(width)

    def forward(self, x):
        h = self.a(x) * 4
        while h.abs().max() > 1:  # BREAK: loop
            h = h * 0.5
        return self.b(h)


class EarlyExitLayers(nn.Module):
    """``if <data>: break`` in a loop over layers: the rest of the stack is skipped once the
    activations settle."""

    def __init__(self, width: int = 16, depth: int = 3) -> None:
        super().__init__()
        self.layers = nn.ModuleList(Block(width) for _ in range(depth))

    def forward(self, x):
        h = x
        for layer in self.layers:
            h = h + layer(h)
            if h.abs().mean() > 1.0:  # BREAK: branch
                break
        return h


class NonzeroGather(nn.Module):
    """``nonzero`` — an output whose shape depends on the data."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.a = Block(width)

    def forward(self, x):
        h = self.a(x)
        idx = (h > 0).nonzero()  # BREAK: dynamic_shape
        return h, idx


class ScalarScale(nn.Module):
    """``.item()`` used in plain arithmetic."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.a, self.b = Block(width), Block(width)

    def forward(self, x):
        h = self.a(x)
        peak = h.abs().max().item()  # BREAK: scalar_read
        return self.b(h / (peak + 1.0))


@torch.compiler.disable
def _host_only(t):
    return t.clone()


class CallsDisabled(nn.Module):
    """A call into a function Dynamo is told not to trace."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.a, self.b = Block(width), Block(width)

    def forward(self, x):
        h = self.a(x)
        h = _host_only(h)  # BREAK: unsupported_call
        return self.b(h)


class GatedAttention(nn.Module):
    """A submodule that branches: nested inside a stack of layers."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.q = nn.Linear(width, width)

    def forward(self, h):
        scores = self.q(h)
        if scores.amax() > 0.0:  # BREAK: branch
            scores = torch.softmax(scores, dim=-1)
        return h + scores


class Layer(nn.Module):
    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.attn = GatedAttention(width)
        self.ff = Block(width)

    def forward(self, h):
        return self.ff(self.attn(h))


class Encoder(nn.Module):
    """Two layers, each breaking inside ``layers.<i>.attn``."""

    def __init__(self, width: int = 16, depth: int = 2) -> None:
        super().__init__()
        self.layers = nn.ModuleList(Layer(width) for _ in range(depth))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class ElifChain(nn.Module):
    """``if / elif / else`` on tensor predicates, several names assigned per branch."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.a, self.b = Block(width), Block(width)

    def forward(self, x):
        h = self.a(x)
        m = h.mean()
        if m > 0.2:  # BREAK: branch
            h, scale = self.b(h), 2.0 * m
        elif m < -0.2:  # BREAK: branch
            h, scale = -self.b(h), -m
        else:
            h, scale = h * 0.5, m + 1.0
        return h * scale


class AndOrPredicate(nn.Module):
    """``and``/``or``/``not`` between tensor predicates."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.a, self.b = Block(width), Block(width)

    def forward(self, x):
        h = self.a(x)
        if (h.mean() > 0 and h.max() > 0.5) or not h.min() > -0.99:  # BREAK: branch
            h = self.b(h)
        return h


class EarlyReturn(nn.Module):
    """A branch that returns early; the rest of forward is the other continuation."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.a, self.b = Block(width), Block(width)

    def forward(self, x):
        h = self.a(x)
        if h.sum() < 0:  # BREAK: branch
            return h * 0.0 + 1.0
        h = self.b(h)
        return h + 1.0


class BufferInBranch(nn.Module):
    """A buffer updated inside a data-dependent branch."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.a = Block(width)
        self.register_buffer("hits", torch.zeros(()))
        self.register_buffer("running", torch.zeros(width))

    def forward(self, x):
        h = self.a(x)
        if h.mean() > 0:  # BREAK: branch
            self.hits += 1
            self.running = 0.9 * self.running + 0.1 * h.mean(0)
        return h + self.running


class PrintInBranch(nn.Module):
    """A print inside a data-dependent branch: it must replay only when that branch ran."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.a, self.b = Block(width), Block(width)

    def forward(self, x):
        h = self.a(x)
        if h.mean() > 0:  # BREAK: branch
            h = self.b(h)
            print("took the positive branch, max", h.max())  # BREAK: side_effect
        return h


class EffectsInNestedBranches(ElifChain):
    """A log call in every arm of an ``elif`` chain (each ``elif`` is an ``if`` nested in the
    ``else``), and a print in a branch nested inside another: each replays only when every
    branch around it ran, in the order the model made them."""

    def forward(self, x):
        h = self.a(x)
        m = h.mean()
        if m > 0.2:  # BREAK: branch
            logger.warning("high mean %s", m)  # BREAK: side_effect
            h = self.b(h)
            if h.max() > 0.4:  # BREAK: branch
                print("and a large max", h.max())  # BREAK: side_effect
                h = h * 0.5
        elif m < -0.2:  # BREAK: branch
            logger.warning("low mean %s", m)  # BREAK: side_effect
            h = -h
        else:
            print("mean near zero")  # BREAK: side_effect
            h = h + 1
        return h
