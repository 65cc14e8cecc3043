"""Models that stitch must refuse clearly (or handle), for tests/stitch/test_hostile.py.

Kept in their own file so the tests can find mutation sites by line (``# MUTATES``).
"""

from __future__ import annotations

import torch
from torch import nn

COUNTER = {"calls": 0}
HISTORY: list = []
SCALE = 1.0


class _Base(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)


class GlobalCounter(_Base):
    def forward(self, x):
        COUNTER["calls"] += 1  # MUTATES
        h = self.lin(x) * min(COUNTER["calls"], 1)  # read: refused
        return h * 2 if h.sum() > 0 else h - 1


class GlobalAppend(_Base):
    def forward(self, x):
        h = self.lin(x)
        HISTORY.append(h.sum().item())  # MUTATES
        return h


class GlobalAppendInBranch(_Base):
    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0:
            HISTORY.append(h.max())  # MUTATES
            h = h * 2
        return h


class GlobalRebind(_Base):
    def forward(self, x):
        global SCALE
        h = self.lin(x)
        if h.sum() > 0:
            SCALE = 3.0  # MUTATES
        return h * 2


class AttributeCounter(_Base):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1  # MUTATES
        h = self.lin(x) * min(self.calls, 1)  # read: refused (only-added counters are
        if h.sum() > 0:  # replayed: tests/stitch/test_counters.py)
            h = h * 2
        return h


class AttributeAppend(_Base):
    """Deferred, not refused: stitch replays the append after the graph (test_appends.py)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = []

    def forward(self, x):
        h = self.lin(x)
        self.seen.append(h.mean())  # MUTATES
        if h.sum() > 0:
            h = h * 2
        return h


class _Norms(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norms = []

    def forward(self, h):
        self.norms.append(h.norm())
        return h + 1


class AppendsEverywhere(_Base):
    """Appends at the top level, of a size, inside both arms of a branch, in a submodule."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = []
        self.inner = _Norms()

    def forward(self, x):
        h = self.lin(x)
        self.seen.append(h.shape[0])
        if h.sum() > 0:
            self.seen.append(h.max())
            h = h * 2
        else:
            self.seen.append(h.min())
            h = h - 1
        self.seen.append(h.mean())
        return self.inner(h)


class AppendOnlyInBranch(_Base):
    def __init__(self) -> None:
        super().__init__()
        self.seen = []

    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0:
            self.seen.append(h.max())  # MUTATES
            h = h * 2
        return h


class ExtendsList(_Base):
    def __init__(self) -> None:
        super().__init__()
        self.seen = []

    def forward(self, x):
        h = self.lin(x)
        self.seen.extend([h.mean()])  # MUTATES
        return h


class AppendsTuple(_Base):
    def __init__(self) -> None:
        super().__init__()
        self.seen = []

    def forward(self, x):
        h = self.lin(x)
        self.seen.append((h.mean(), h.max()))  # MUTATES
        return h


class LazyAttribute(_Base):
    """A one-time lazy initialisation is not a per-call side effect: exported."""

    def __init__(self) -> None:
        super().__init__()
        self.table = None

    def forward(self, x):
        if self.table is None:
            self.table = torch.arange(8.0)
        h = self.lin(x) + self.table
        if h.sum() > 0:
            h = h * 2
        return h


class WritesFile(_Base):
    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0:
            with open(self.path, "a") as f:  # BREAK: unsupported_call
                f.write("positive\n")
        return h


class TensorOrNone(_Base):
    """Branches that produce different kinds of things (a tensor vs None)."""

    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0:
            extra = h * 2
        else:
            extra = None
        return h if extra is None else extra


class AsyncForward(_Base):
    async def forward(self, x):
        return self.lin(x)


class OwnError(_Base):
    def forward(self, x):
        if x.sum() > 1e6:
            return x
        raise KeyError("the model's own error")


def exec_model() -> nn.Module:
    """forward made by exec: no source file to rewrite."""
    namespace: dict = {}
    exec("def forward(self, x):\n    h = self.lin(x)\n    if h.sum() > 0:\n        return h * 2"
         "\n    return h - 1\n", namespace)
    cls = type("ExecModel", (_Base,), {"forward": namespace["forward"]})
    return cls()


class _LambdaHolder(_Base):
    pick = staticmethod(lambda h: h * 2 if h.sum() > 0 else h - 1)

    def forward(self, x):
        return self.pick(self.lin(x))


def lambda_model() -> nn.Module:
    return _LambdaHolder()


class GuardedCounter(_Base):
    """A buffer updated in a branch torch.cond cannot express (a ``try`` block): guarded."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("total", torch.zeros(8))

    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0:
            try:
                self.total += h.mean(0)
            finally:
                self.total *= 1.0
        self.total += 0.5
        return h + self.total


class ReadsBackItsList(_Base):
    """Reads the length of the list it appends to: the graph bakes in the traced length."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = []

    def forward(self, x):
        h = self.lin(x)
        self.seen.append(h.mean())
        return h * len(self.seen)


class AssertsInGraph(nn.Module):
    """One graph under torch.compile (Dynamo keeps the assert), refused by torch.export.
    Here, not in a test file: pytest rewrites the asserts of test modules."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x)
        assert h.abs().max() < 1e6, "activations blew up"
        return h * 2


class DeepensThenAsserts(nn.Module):
    """Two rewrite rounds (the inner ``if`` is found once the outer one is a cond), then a
    break only torch.export finds: the assert Dynamo keeps in its graph."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 1e6:
            if h.mean() > 0:
                h = h * 3
            h = h + 1
        assert h.abs().max() < 1e6, "activations blew up"
        return h * 2
