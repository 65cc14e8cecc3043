"""A third batch of programs written as people write model code."""
import logging
import warnings

import numpy as np
import torch
import torch.nn as nn

log = logging.getLogger("unseen3")


# 1. a rotary table cache grown when a longer sequence comes (LLaMA-era code)
class Rotary(nn.Module):
    def __init__(self, dim=8, max_len=4):
        super().__init__()
        inv = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv, persistent=False)
        self._set_cache(max_len)

    def _set_cache(self, seq_len):
        self.max_seq_len_cached = seq_len
        t = torch.arange(seq_len, dtype=self.inv_freq.dtype)
        freqs = torch.outer(t, self.inv_freq)
        self.register_buffer("cos_cached", freqs.cos(), persistent=False)

    def forward(self, x):
        seq_len = x.shape[1]
        if seq_len > self.max_seq_len_cached:
            self._set_cache(seq_len)
        return x * self.cos_cached[:seq_len].repeat(1, 2)[:, : x.shape[-1]]


# 2. f-string debug specifier
class FDebug(nn.Module):
    def forward(self, x):
        loss = x.pow(2).mean()
        if loss > 1:
            print(f"{loss=:.3f} {x.shape=}")
        return loss


# 3. debug logging of a read, at a level that is off
class DebugLog(nn.Module):
    def forward(self, x):
        log.debug("max %.3f", x.abs().max().item())
        return x * 2


# 4. tuple targets from a conditional expression
class TupleIfExp(nn.Module):
    def forward(self, x, y):
        a, b = (x, y) if x.sum() > y.sum() else (y, x)
        return a - b


# 5. Python max over 0-d tensors
class PyMax(nn.Module):
    def forward(self, x, y):
        m = max(x.sum(), y.sum())
        return x / m


# 6. round() of a read used as a Python number
class Rounded(nn.Module):
    def forward(self, x):
        s = round(x.mean().item(), 1)
        return x * s


# 7. the user already wrote torch.cond, plus a print after it
class UserCond(nn.Module):
    def forward(self, x):
        y = torch.cond(x.sum() > 0, lambda t: t * 2, lambda t: t - 1, (x,))
        if y.mean() > 1:
            print("large mean")
        return y


# 8. a generator helper iterated with a data branch
def chunks(x, n):
    for c in x.split(n):
        yield c


class GenChunks(nn.Module):
    def forward(self, x):
        out = []
        for c in chunks(x, 2):
            out.append(c * 2 if c.sum() > 0 else c)
        return torch.cat(out)


# 9. numpy statistics in a warning
class NumpyStats(nn.Module):
    def forward(self, x):
        arr = x.detach().cpu().numpy()
        if np.isnan(arr).any():
            warnings.warn("nan in input")
        return x.nan_to_num()


# 10. min/max normalisation with reads
class MinMax(nn.Module):
    def forward(self, x):
        lo, hi = x.min().item(), x.max().item()
        return (x - lo) / (hi - lo + 1e-6)


# 11. tracing probe plus data test
class TracingProbe(nn.Module):
    def forward(self, x):
        if not torch.jit.is_tracing() and torch.isnan(x).any():
            warnings.warn("nan found")
            x = torch.nan_to_num(x)
        return x + 1


# 12. length from a mask, slice to it
class Packing(nn.Module):
    def forward(self, x, mask):
        max_len = int(mask.sum(-1).max())
        return x[:, :max_len].mean(1)


def cases():
    g = torch.Generator().manual_seed(2)

    def r(*s):
        return torch.randn(*s, generator=g)

    yield "rotary", Rotary(), [(r(2, 3, 8),), (r(2, 6, 8),)], [(r(2, 5, 8),), (r(2, 9, 8),)]
    yield "fdebug", FDebug(), [(r(3) * 0.1,), (r(4) * 5,)], [(r(5) * 3,)]
    yield "debug_log", DebugLog(), [(r(3),), (r(4),)], [(r(5),)]
    yield "tuple_ifexp", TupleIfExp(), [(r(3) + 1, r(3)), (r(3) - 1, r(3))], [(r(3), r(3))]
    yield "py_max", PyMax(), [(r(3) + 1, r(3)), (r(3) - 1, r(3) + 2)], [(r(3) + 3, r(3))]
    yield "rounded", Rounded(), [(r(3),), (r(4),)], [(r(5),)]
    yield "user_cond", UserCond(), [(r(3) + 1,), (r(4) - 1,)], [(r(5) + 3,)]
    yield "gen_chunks", GenChunks(), [(r(4),), (r(4),)], [(r(4),)]
    yield "numpy_stats", NumpyStats(), [(r(3),), (torch.tensor([1.0, float("nan")]),)], [(r(5),)]
    yield "min_max", MinMax(), [(r(3),), (r(4),)], [(r(5),)]
    yield "tracing_probe", TracingProbe(), [(r(3),), (torch.tensor([1.0, float("nan"), 2.0]),)], [(r(3),)]
    m1 = torch.tensor([[1, 1, 0, 0], [1, 0, 0, 0]])
    m2 = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    yield "packing", Packing(), [(r(2, 4, 3), m1), (r(2, 4, 3), m2)], [(r(2, 4, 3), torch.ones(2, 4, dtype=torch.long))]
