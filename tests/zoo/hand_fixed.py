"""Hand-fixed versions of the benchmarked zoo models: what an engineer would write by hand
with ``torch.cond``/``torch.where``/``while_loop``/``_assert_async`` and an epilogue — the best
a stitcher can do. ``make bench`` times each against the stitched program, same backend.

Each wrapper shares the zoo model's weights and returns ``(outputs, extras)``; the epilogue
is written by hand as data, so it runs through the same replay as stitch's.
"""

from __future__ import annotations

import torch
from torch import nn

from stitch.epilogue import Arg, Entry, Epilogue

from .cases import make

_HERE = "tests/zoo/patterns.py"


def _print(text: str, output: int, line: int, guard: int | None = None) -> Entry:
    return Entry("print", f"{_HERE}:{line}", (Arg("const", value=text), Arg("tensor", output)),
                 {"sep": " ", "end": "\n", "stream": "stdout"}, guard)


class _Fixed(nn.Module):
    def __init__(self, m: nn.Module) -> None:
        super().__init__()
        self.m = m


class BranchOnTensor(_Fixed):
    def forward(self, x):
        h = self.m.a(x)
        return torch.cond(h.mean() > 0, lambda h: self.m.b(h), lambda h: -h, (h,)), ()


class FlagThenBranch(_Fixed):
    def forward(self, x):
        h = self.m.a(x)
        return torch.cond(h.mean() > 0, lambda h: h + self.m.b(h), lambda h: h.clone(),
                          (h,)), ()


class PrintStats(_Fixed):
    EPILOGUE = Epilogue((_print("hidden mean:", 0, 81),), 1)

    def forward(self, x):
        h = self.m.a(x)
        return self.m.b(h), (h.mean(),)


class LogWarning(_Fixed):
    EPILOGUE = Epilogue((Entry("log", f"{_HERE}:94", (Arg("const", value="hidden norm %.4f"),
                                                      Arg("tensor", 0)),
                               {"logger": "tests.zoo", "method": "warning"}),), 1)

    def forward(self, x):
        h = self.m.a(x)
        return self.m.b(h), (h.norm(),)


class ElifChain(_Fixed):
    def forward(self, x):
        b = self.m.b
        h = self.m.a(x)
        m = h.mean()

        def not_big(h, m):
            return torch.cond(m < -0.2, lambda h, m: (-b(h), -m),
                              lambda h, m: (h * 0.5, m + 1.0), (h, m))

        h, scale = torch.cond(m > 0.2, lambda h, m: (b(h), 2.0 * m), not_big, (h, m))
        return h * scale, ()


class NestedEncoder(_Fixed):
    def forward(self, x):
        for layer in self.m.layers:
            scores = layer.attn.q(x)
            # both arms cheap and elementwise-shaped: predication, as a hand-fixer would
            scores = torch.where(scores.amax() > 0.0, torch.softmax(scores, dim=-1), scores)
            x = layer.ff(x + scores)
        return x, ()


class TensorCountedLoop(_Fixed):
    def forward(self, x, n):
        a = self.m.a

        def cond_fn(i, n, h):
            return i < n

        def body_fn(i, n, h):
            return i + 1, n.clone(), a(h)

        _, _, h = torch._higher_order_ops.while_loop(
            cond_fn, body_fn, (torch.zeros((), dtype=n.dtype), n, x))
        return h, ()


class BufferInBranch(_Fixed):
    def forward(self, x):
        m = self.m
        h = m.a(x)
        hits, running = torch.cond(
            h.mean() > 0, lambda h, c, r: (c + 1, 0.9 * r + 0.1 * h.mean(0)),
            lambda h, c, r: (c.clone(), r.clone()), (h, m.hits, m.running))
        m.hits.copy_(hits)
        m.running.copy_(running)
        return h + running, ()


class PrintInBranch(_Fixed):
    EPILOGUE = Epilogue((_print("took the positive branch, max", 1, 309, guard=0),), 2)

    def forward(self, x):
        h = self.m.a(x)
        taken = h.mean() > 0

        def positive(h):
            y = self.m.b(h)
            return y, y.max()

        h, peak = torch.cond(taken, positive, lambda h: (h.clone(), h.new_zeros(())), (h,))
        return h, (taken, peak)


class AssertFinite(_Fixed):
    def forward(self, x):
        h = self.m.a(x) + x
        torch._assert_async(h.abs().max() < 1e4, "activations overflowed")
        return self.m.b(h), ()


FIXED = {"branch_on_tensor": BranchOnTensor, "flag_then_branch": FlagThenBranch,
         "print_stats": PrintStats, "log_warning": LogWarning, "elif_chain": ElifChain,
         "nested_encoder": NestedEncoder, "tensor_counted_loop": TensorCountedLoop,
         "buffer_in_branch": BufferInBranch, "print_in_branch": PrintInBranch,
         "assert_finite": AssertFinite}


def hand_fixed(name: str):
    """The hand-fixed zoo model as a ``StitchedProgram`` (exported with ``torch.export``
    directly, no stitch rewriting), so it lowers and deploys through the same code."""
    from capture.inputs import normalize
    from stitch.program import StitchedProgram

    if name not in FIXED:
        raise KeyError(f"no hand-fixed version of {name!r}; have {sorted(FIXED)}")
    model, args, kwargs, examples = make(name)
    wrapper = FIXED[name](model)
    ep = torch.export.export(wrapper, args, kwargs, strict=False)  # grad mode as stitch's
    return StitchedProgram(ep, getattr(wrapper, "EPILOGUE", Epilogue((), 0)),
                           examples=normalize(model, args, kwargs, examples))
