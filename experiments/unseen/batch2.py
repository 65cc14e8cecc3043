"""A second batch of programs written as people write model code."""
import logging
import warnings
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("unseen2")


# 1. optional mask and a data test joined by `and`
class MaskedScores(nn.Module):
    def forward(self, scores, mask=None):
        if mask is not None and (mask == 0).any():
            scores = scores.masked_fill(mask == 0, -1e4)
        return scores.softmax(-1)


# 2. a gate per layer read by index (learned layer skipping)
class GatedLayers(nn.Module):
    def __init__(self, d=8, n=3):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(d, d) for _ in range(n))
        self.gate = nn.Linear(d, n)

    def forward(self, x):
        g = torch.sigmoid(self.gate(x.mean(0)))
        h = x
        for i, layer in enumerate(self.layers):
            if g[i] > 0.5:
                h = h + layer(h)
        return h


# 3. while True with a break on data and a counter
class Refine(nn.Module):
    def forward(self, x):
        i = 0
        while True:
            x = x * 0.5
            i += 1
            if x.norm() < 1.0 or i >= 6:
                break
        return x, i


# 4. %-formatting in a log message inside a branch
class PercentLog(nn.Module):
    def forward(self, x):
        loss = (x ** 2).mean()
        if loss > 1.0:
            log.warning("high loss %.4f" % loss.item())
        return loss


# 5. printing the tensor itself
class PrintTensor(nn.Module):
    def forward(self, x):
        if x.min() < 0:
            print("negative input:", x)
        return x.abs()


# 6. a dataclass output with an optional field set by data
@dataclass
class Output:
    logits: torch.Tensor
    aux: torch.Tensor | None = None


class DataclassOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x):
        logits = self.lin(x)
        aux = logits.max(-1).values if logits.mean() > 0 else None
        return Output(logits=logits, aux=aux)


# 7. nonlocal counter in a closure helper
class ClosureCount(nn.Module):
    def forward(self, x):
        halvings = 0

        def step(h):
            nonlocal halvings
            if h.abs().max() > 1:
                halvings += 1
                return h / 2
            return h

        for _ in range(3):
            x = step(x)
        return x, halvings


# 8. Python max over .tolist() then slicing
class MaxLen(nn.Module):
    def forward(self, x, lengths):
        m = max(lengths.tolist())
        return x[:, :m].sum(-1)


# 9. a threshold read with .item() into torch.where
class ItemThreshold(nn.Module):
    def forward(self, x):
        thr = x.mean().item()
        return torch.where(x > thr, x, torch.zeros_like(x))


# 10. dtype test joined with a data test
class Overflow(nn.Module):
    def forward(self, x):
        if x.dtype == torch.float32 and x.abs().max() > 1e3:
            warnings.warn("large values, rescaling")
            x = x / x.abs().max()
        return x


# 11. ifexp inside a list comprehension over a tuple of tensors
class CompIfExp(nn.Module):
    def forward(self, a, b):
        parts = [t if t.sum() > 0 else -t for t in (a, b)]
        return torch.cat(parts)


# 12. a method used as the predicate
class MethodPred(nn.Module):
    def is_saturated(self, h):
        return (h.abs() > 0.99).float().mean() > 0.5

    def forward(self, x):
        h = torch.tanh(x)
        if self.is_saturated(h):
            h = h * 0.5
        return h


# 13. early-exit loop over a module list returning a tuple with the exit index
class ExitIndex(nn.Module):
    def __init__(self, d=6, n=3):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(d, d) for _ in range(n))
        self.exit = nn.Linear(d, 2)

    def forward(self, x):
        for i, blk in enumerate(self.blocks):
            x = torch.relu(blk(x))
            logits = self.exit(x)
            if logits.softmax(-1).max() > 0.9:
                return logits, i
        return logits, len(self.blocks) - 1


# 14. a helper under torch.no_grad with a data branch
@torch.no_grad()
def _renorm(w):
    n = w.norm()
    if n > 1:
        w = w / n
    return w


class NoGradHelper(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4))

    def forward(self, x):
        return x * _renorm(self.w * x.mean())


# 15. raise with a computed message in an elif chain
class Validate(nn.Module):
    def forward(self, x):
        if torch.isnan(x).any():
            raise ValueError(f"NaN in input ({int(torch.isnan(x).sum())} values)")
        elif (x.abs() > 100).any():
            raise ValueError("input out of range")
        return F.relu(x)


def cases():
    g = torch.Generator().manual_seed(1)

    def r(*s):
        return torch.randn(*s, generator=g)

    m = torch.ones(2, 5)
    m0 = m.clone()
    m0[0, 2] = 0
    yield "masked_scores", MaskedScores(), [(r(2, 5), m0), (r(2, 5), m)], [(r(2, 5), m0), (r(2, 5), m)]
    yield "gated_layers", GatedLayers(), [(r(4, 8),), (r(5, 8) * 3,)], [(r(3, 8),), (r(6, 8) * 5,)]
    yield "refine", Refine(), [(r(4) * 0.1,), (r(5) * 10,)], [(r(3) * 100,)]
    yield "percent_log", PercentLog(), [(r(3) * 0.1,), (r(4) * 5,)], [(r(5) * 3,)]
    yield "print_tensor", PrintTensor(), [(r(3).abs(),), (r(4),)], [(r(5),)]
    yield "dataclass_out", DataclassOut(), [(r(2, 4),), (r(3, 4) * 4,)], [(r(5, 4),), (r(1, 4),)]
    yield "closure_count", ClosureCount(), [(r(3) * 0.1,), (r(4) * 10,)], [(r(5) * 3,)]
    yield "max_len", MaxLen(), [(r(2, 6), torch.tensor([3, 4])), (r(3, 6), torch.tensor([2, 5, 1]))], \
        [(r(2, 6), torch.tensor([6, 1]))]
    yield "item_threshold", ItemThreshold(), [(r(3),), (r(4),)], [(r(5),)]
    yield "overflow", Overflow(), [(r(3),), (r(4) * 1e4,)], [(r(5) * 1e5,)]
    yield "comp_ifexp", CompIfExp(), [(r(3).abs(), -r(3).abs()), (-r(4).abs(), r(4).abs())], [(r(2), r(2))]
    yield "method_pred", MethodPred(), [(r(4) * 0.1,), (r(5) * 10,)], [(r(3) * 5,)]
    yield "exit_index", ExitIndex(), [(r(2, 6),), (r(3, 6) * 10,)], [(r(4, 6) * 3,), (r(1, 6) * 0.01,)]
    yield "nograd_helper", NoGradHelper(), [(r(4) * 0.01,), (r(4) * 10,)], [(r(4),)]
    yield "validate", Validate(), [(r(3),), (r(4),)], [(torch.tensor([1.0, float("nan")]),),
                                                       (torch.tensor([1.0, 500.0]),), (r(5),)]
