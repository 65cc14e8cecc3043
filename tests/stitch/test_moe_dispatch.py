"""The other shapes of mixture-of-experts dispatch in transformers (4.52 and 5.x): a loop over
``nonzero(as_tuple=True)[0].tolist()`` with boolean-mask writes and ``getattr`` by a
formatted name (Switch 4.52), ``range(E)`` with ``if idx.shape[0] == 0: continue`` over
chunked weights (DBRX 4.52). Each must be one exact graph."""

from __future__ import annotations

import torch
from torch import nn

import stitch


class ListedHits(nn.Module):
    """Switch Transformers 4.52: the hit experts as Python ints; boolean-mask reads/writes."""

    def __init__(self, n: int = 4, d: int = 8) -> None:
        super().__init__()
        self.router = nn.Linear(d, n)
        self.experts = nn.Module()
        for i in range(n):
            setattr(self.experts, f"expert_{i}", nn.Linear(d, d))

    def forward(self, h):
        router_mask = nn.functional.one_hot(self.router(h).argmax(-1), 4).bool()
        next_states = torch.zeros_like(h)
        idx_mask = router_mask.reshape(-1, 4).sum(dim=0)
        idx_mask = torch.nonzero(idx_mask, as_tuple=True)[0].tolist()  # rebinds its own name
        for idx in idx_mask:
            next_states[router_mask[:, :, idx]] = getattr(self.experts, "expert_{}".format(idx))(  # noqa: UP032 - as written there
                h[router_mask[:, :, idx]])
        return next_states


class SkipsEmptyExperts(nn.Module):
    """DBRX 4.52: every expert, skipping one without tokens; the weights are views of one
    parameter the branch reads through its closure (two cond inputs sharing memory)."""

    def __init__(self, n: int = 4, d: int = 8) -> None:
        super().__init__()
        self.router = nn.Linear(d, n)
        self.w = nn.Parameter(torch.randn(n * d, d) * 0.1)
        self.n = n

    def forward(self, h):
        b, s, d = h.shape
        x = h.reshape(-1, d)
        mask = nn.functional.one_hot(self.router(x).argmax(-1), self.n).permute(1, 0)
        chunks = [w.squeeze(0) for w in self.w.view(self.n, d, d).chunk(self.n, dim=0)]
        out = torch.zeros_like(x)
        for e in range(self.n):
            token_idx = torch.where(mask[e])[0]
            if token_idx.shape[0] == 0:
                continue
            expert_out = x[token_idx] @ chunks[e]
            out.index_add_(0, token_idx, expert_out)
        return out.reshape(b, s, d)


def _exact(model, example, others):
    program = stitch.export(model, (example,), examples=[((others[0],), {})])
    assert program.report.graphs_after == 1
    for x in (example, *others):
        torch.testing.assert_close(program(x), model(x), rtol=0, atol=0)
    return program


def test_hit_experts_as_python_ints_with_mask_writes():
    torch.manual_seed(0)
    h = torch.randn(1, 6, 8)
    program = _exact(ListedHits(), h, [torch.randn(1, 6, 8), torch.randn(1, 1, 8).repeat(1, 6, 1)])
    assert any(d.reason.startswith("loop over nonzero()") for d in program.report.decisions)


def test_continue_on_an_empty_expert_becomes_a_cond_over_the_rest():
    torch.manual_seed(1)
    h = torch.randn(1, 6, 8)
    program = _exact(SkipsEmptyExperts(), h, [torch.randn(1, 6, 8),
                                              torch.randn(1, 1, 8).repeat(1, 6, 1)])
    forced = [c.what for c in program.report.checks if "forced" in c.what]
    # the examples take both sides of the size test (experts with tokens and without): each
    # side is verified by the examples that take it, none needs forcing
    assert not forced, forced



class ScalesWithSharedWeights(SkipsEmptyExperts):
    """A branch reading views of one weight (two cond inputs sharing memory: the cond is
    traced again on copies) that also changes a number (its arms are wrapped to carry it):
    the copies must reach the wrapped arm's own closure."""

    def forward(self, h):
        x = h.reshape(-1, h.shape[-1])
        chunks = [w.squeeze(0) for w in self.w.view(self.n, 8, 8).chunk(self.n, dim=0)]
        scale = 1.0
        if self.router(x).sum() > 0:
            out = x @ chunks[0] + x @ chunks[1]
            scale = scale * 0.5
        else:
            out = x @ chunks[2]
        return (out * scale).reshape(h.shape)


def test_a_number_carried_with_weights_that_share_memory():
    torch.manual_seed(1)
    model = ScalesWithSharedWeights()
    h = torch.randn(1, 6, 8)
    other = -h if (model.router(h.reshape(-1, 8)).sum() > 0) != (
        model.router(-h.reshape(-1, 8)).sum() > 0) else torch.randn(1, 6, 8)
    _exact(model, h, [other])


class HitsUnderNoGrad(nn.Module):
    """transformers 5.x GPT-OSS-style experts (the OpenAI privacy filter): the hit experts
    found under ``torch.no_grad()``, each row unpacked (``e = e[0]``) and a sentinel expert
    skipped with ``continue`` (a Python test once the row is the loop's index)."""

    def __init__(self, n: int = 4, d: int = 8) -> None:
        super().__init__()
        self.n = n
        self.router = nn.Linear(d, n)
        self.w = nn.Parameter(torch.randn(n, d, d) * 0.1)

    def forward(self, h):
        x = h.reshape(-1, h.shape[-1])
        out = torch.zeros_like(x)
        with torch.no_grad():
            mask = nn.functional.one_hot(self.router(x).argmax(-1), self.n + 1).permute(1, 0)
            hit = torch.greater(mask.sum(dim=-1), 0).nonzero()
        for e in hit:
            e = e[0]
            if e == self.n:  # never hit here, as in the model: a padding expert
                continue
            (tokens,) = torch.where(mask[e])
            out.index_add_(0, tokens, x[tokens] @ self.w[e])
        return out.reshape(h.shape)


def test_hits_found_under_no_grad_with_a_python_continue():
    torch.manual_seed(2)
    h = torch.randn(1, 6, 8)
    program = _exact(HitsUnderNoGrad(), h, [torch.randn(1, 6, 8),
                                            torch.randn(1, 1, 8).repeat(1, 6, 1)])
    assert any(d.reason.startswith("loop over nonzero()") for d in program.report.decisions)
