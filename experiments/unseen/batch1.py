"""Programs written as people write model code, none from stitch's corpus (first batch)."""
import logging
import math
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("unseen")
CONFIG = {"debug": True, "eps": 1e-6}
SEEN = {}


# 1. MoE: skip experts no token routed to
class MoE(nn.Module):
    def __init__(self, d=8, n=4):
        super().__init__()
        self.router = nn.Linear(d, n)
        self.experts = nn.ModuleList(nn.Linear(d, d) for _ in range(n))

    def forward(self, x):
        top = self.router(x).argmax(-1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            sel = top == e
            if not sel.any():
                continue
            out = out + expert(x) * sel.unsqueeze(-1)
        return out


# 2. greedy decode until all finished
class Decode(nn.Module):
    def __init__(self, v=6, d=8):
        super().__init__()
        self.emb = nn.Embedding(v, d)
        self.out = nn.Linear(d, v)
        self.eos = 0

    def forward(self, tok):
        h = self.emb(tok)
        finished = torch.zeros(tok.shape[0], dtype=torch.bool)
        steps = []
        step = 0
        while not finished.all() and step < 5:
            logits = self.out(h)
            nxt = logits.argmax(-1)
            steps.append(nxt)
            finished = finished | (nxt == self.eos)
            h = h + self.emb(nxt)
            step += 1
        return h, step


# 3. NaN guard with a logged warning and a step counter
class NanGuard(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        y = self.lin(x).log()
        if torch.isnan(y).any():
            log.warning("nan in output at call %d (%d values)", self.calls, int(torch.isnan(y).sum()))
            y = torch.nan_to_num(y, nan=0.0)
        return y


# 4. confidence-based early exit over zip(layers, heads)
class EarlyExit(nn.Module):
    def __init__(self, d=8, n=3):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(d, d) for _ in range(n))
        self.heads = nn.ModuleList(nn.Linear(d, 3) for _ in range(n))
        self.threshold = 0.5

    def forward(self, x):
        h = x
        for layer, head in zip(self.layers, self.heads):
            h = torch.tanh(layer(h))
            conf = head(h).softmax(-1).max()
            if conf.item() > self.threshold:
                break
        return h


# 5. clip by norm, with a Python float threshold
class ClipNorm(nn.Module):
    def __init__(self, max_norm=2.0):
        super().__init__()
        self.max_norm = max_norm

    def forward(self, x):
        norm = x.norm()
        if norm > self.max_norm:
            x = x * (self.max_norm / norm)
        return x


# 6. walrus in the test
class Walrus(nn.Module):
    def forward(self, x):
        if (m := x.abs().max()) > 1:
            x = x / m
        return x * 2


# 7. chained comparison on data
class Chained(nn.Module):
    def forward(self, x):
        if 0 < x.mean() < 0.5:
            return x + 1
        elif x.mean() >= 0.5:
            return x - 1
        return x


# 8. per-sample loop over unbind with a branch, stacked
class PerSample(nn.Module):
    def forward(self, x):
        outs = []
        for row in x.unbind(0):
            if row.sum() > 0:
                outs.append(row * 2)
            else:
                outs.append(-row)
        return torch.stack(outs)


# 9. global config debug print with format spec
class DebugPrint(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        if CONFIG["debug"] and y.abs().max() > 1.0:
            print(f"large activation: max={y.abs().max():.3f} shape={tuple(y.shape)}")
        return y


# 10. history dict of lists (setdefault)
class History(nn.Module):
    def __init__(self):
        super().__init__()
        self.history = {}

    def forward(self, x):
        self.history.setdefault("norm", []).append(x.norm().item())
        return x.relu()


# 11. empty batch guard (detection style)
class EmptyGuard(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 2)

    def forward(self, boxes):
        keep = boxes[:, 0] > 0
        boxes = boxes[keep]
        if boxes.shape[0] == 0:
            return boxes.new_zeros((0, 2))
        return self.lin(boxes)


# 12. a helper object's method decides
class Policy:
    def __init__(self, limit):
        self.limit = limit

    def decide(self, x):
        if x.max() > self.limit:
            return "clip"
        return "keep"


class UsesPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.policy = Policy(1.0)

    def forward(self, x):
        if self.policy.decide(x) == "clip":
            x = x.clamp(max=1.0)
        return x + 1


# 13. assert with computed message in a module-level helper
def _check_positive(t, name):
    assert torch.all(t >= 0), f"{name} has negative entries (min {t.min().item():.2f})"


class Asserting(nn.Module):
    def forward(self, x):
        y = x.exp()
        _check_positive(y, "y")
        return y.sqrt()


# 14. a scalar statistic kept as a Python float attribute (EMA)
class RunningMax(nn.Module):
    def __init__(self):
        super().__init__()
        self.running = 0.0

    def forward(self, x):
        self.running = max(self.running * 0.9, float(x.abs().max()))
        return x / (self.running + 1e-6)


# 15. temperature from data in an ifexp, math on the Python float
class Temperature(nn.Module):
    def forward(self, x):
        t = float(x.std()) if x.numel() > 1 else 1.0
        t = max(t, 0.1)
        return F.softmax(x / math.sqrt(t), dim=-1)


# 16. warnings.warn once per forward when clipping happens, with stacklevel
class WarnClip(nn.Module):
    def forward(self, x):
        over = (x > 3).sum()
        if over > 0:
            warnings.warn(f"{int(over)} values above 3 were clipped", RuntimeWarning, stacklevel=2)
            x = x.clamp(max=3)
        return x


# 17. a loop counted by data: halve until small
class Halve(nn.Module):
    def forward(self, x):
        n = 0
        while x.abs().max() > 1:
            x = x / 2
            n += 1
        return x, n


# 18. early return inside a with block
class WithReturn(nn.Module):
    def forward(self, x):
        with torch.no_grad():
            s = x.sum()
        with torch.autocast("cpu", enabled=False):
            if s > 0:
                return x.softmax(-1)
            y = x.sigmoid()
        return y


# 19. nonzero indices as a Python loop, in-place updates
class IndexLoop(nn.Module):
    def forward(self, x):
        x = x.clone()
        for i in torch.nonzero(x[:, 0] > 0).flatten().tolist():
            x[i] = x[i] * 2
        return x


# 20. dict output with an optional field decided by data
class OptionalOut(nn.Module):
    def forward(self, x):
        h = x.tanh()
        out = {"h": h}
        if h.mean() > 0:
            out["pos"] = h.clamp(min=0)
        return out


# 21. module-global memo counter without `global`
class GlobalCount(nn.Module):
    def forward(self, x):
        key = "neg" if x.sum() < 0 else "pos"
        SEEN[key] = SEEN.get(key, 0) + 1
        return x.abs()


# 22. any() over a generator of tensor tests
class AnyGen(nn.Module):
    def forward(self, a, b):
        if any(t.isnan().any() for t in (a, b)):
            return torch.zeros_like(a)
        return a + b


# 23. try/except around a data-dependent check raising
class TryExcept(nn.Module):
    def forward(self, x):
        try:
            if (x < 0).any():
                raise ValueError("negative")
            y = x.sqrt()
        except ValueError:
            y = x.abs().sqrt()
        return y


# 24. top-k with k from data (int)
class TopKData(nn.Module):
    def forward(self, x):
        k = int((x > 0).sum().clamp(min=1, max=x.shape[-1]))
        return x.topk(k, dim=-1).values.sum(-1)


def cases():
    g = torch.Generator().manual_seed(0)

    def r(*s, scale=1.0, shift=0.0):
        return torch.randn(*s, generator=g) * scale + shift

    yield "moe", MoE(), [(r(5, 8),), (r(7, 8),)], [(r(6, 8),), (r(1, 8),)]
    yield "decode", Decode(), [(torch.tensor([1, 2, 3]),), (torch.tensor([0, 5]),)], \
        [(torch.tensor([4, 4, 1, 2]),)]
    yield "nan_guard", NanGuard(), [(r(3, 4),), (r(2, 4).abs() + 5,)], [(r(4, 4),)]
    yield "early_exit", EarlyExit(), [(r(2, 8),), (r(3, 8, scale=5),)], [(r(4, 8, scale=0.1),)]
    yield "clip_norm", ClipNorm(), [(r(4) * 0.1,), (r(6) * 3,)], [(r(5),)]
    yield "walrus", Walrus(), [(r(3) * 0.1,), (r(4) * 5,)], [(r(5),)]
    yield "chained", Chained(), [(r(4) * 0.01 + 0.2,), (r(4) * 0.01 + 0.7,), (r(4) * 0.01 - 1,)], \
        [(r(4) * 0.01 + 0.3,)]
    yield "per_sample", PerSample(), [(r(3, 4),), (r(5, 4),)], [(r(2, 4),)]
    yield "debug_print", DebugPrint(), [(r(2, 4) * 0.01,), (r(3, 4) * 10,)], [(r(4, 4),)]
    yield "history", History(), [(r(3),), (r(4),)], [(r(5),)]
    yield "empty_guard", EmptyGuard(), [(r(4, 4).abs(),), (-r(3, 4).abs(),)], [(r(6, 4),)]
    yield "uses_policy", UsesPolicy(), [(r(4) * 0.1,), (r(5) * 5,)], [(r(3),)]
    yield "asserting", Asserting(), [(r(3),), (r(4),)], [(r(5),)]
    yield "running_max", RunningMax(), [(r(3),), (r(4) * 3,)], [(r(5),)]
    yield "temperature", Temperature(), [(r(2, 5),), (r(3, 5) * 4,)], [(r(4, 5),)]
    yield "warn_clip", WarnClip(), [(r(4),), (r(4) + 4,)], [(r(4) * 3,)]
    yield "halve", Halve(), [(r(4) * 0.1,), (r(5) * 10,)], [(r(3) * 100,)]
    yield "with_return", WithReturn(), [(r(3) + 2,), (r(4) - 2,)], [(r(5),)]
    yield "index_loop", IndexLoop(), [(r(4, 3),), (r(6, 3),)], [(r(5, 3),)]
    yield "optional_out", OptionalOut(), [(r(3) + 1,), (r(4) - 1,)], [(r(5),)]
    yield "global_count", GlobalCount(), [(r(3) + 1,), (r(4) - 1,)], [(r(5),)]
    yield "any_gen", AnyGen(), [(r(3), r(3)), (r(4), torch.full((4,), float("nan")))], \
        [(r(5), r(5))]
    yield "try_except", TryExcept(), [(r(3).abs(),), (r(4),)], [(r(5),)]
    yield "topk_data", TopKData(), [(r(2, 6),), (r(3, 6),)], [(r(4, 6),)]
