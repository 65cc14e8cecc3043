"""The first round's rewrite is checked by torch.export and verification, with no census of
it: a model whose breaks one round fixes takes one census. Where that export fails (the
rewrite exposed a break no census saw), the rounds are taken again, each with its census,
and the program is the one they give."""

from __future__ import annotations

import torch
from torch import nn

import stitch
from stitch.plan import Action
from stitch.synthesize.convert import censuses


def _counting(monkeypatch) -> list[int]:
    calls: list[int] = []
    explain = censuses.explain
    monkeypatch.setattr(censuses, "explain",
                        lambda *a, **k: calls.append(1) or explain(*a, **k))
    return calls


class OneBranch(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0:
            h = h * 2
        else:
            h = h - 1
        return h


class InnerBranchOnlyOneArmReaches(nn.Module):
    """``inner``'s branch runs only in the outer ``if``'s true arm, which no example takes:
    the first census cannot see it; the cond's trace of that arm meets it."""

    def inner(self, h):
        if h.min() > 0:
            return h * 3
        return h + 5

    def forward(self, x):
        h = x * 2
        if h.sum() > 1000:
            h = self.inner(h)
        else:
            h = h - 1
        return h


def _examples():
    torch.manual_seed(0)
    return torch.randn(3, 8), [((torch.randn(5, 8),), {})]


def test_a_break_one_round_fixes_takes_one_census(monkeypatch):
    calls = _counting(monkeypatch)
    model = OneBranch().eval()
    x, more = _examples()
    program = stitch.export(model, (x,), examples=more)
    assert len(calls) == 1
    for inp in (x, -x * 50, x * 50):
        torch.testing.assert_close(program(inp), model(inp))


def test_a_break_the_rewrite_exposes_is_found_by_the_census_rounds(monkeypatch):
    from stitch import rewrite_export
    from stitch.errors import StitchError

    calls = _counting(monkeypatch)
    made: list[str] = []
    export_model = rewrite_export.export_model

    def exported(*args, **kwargs):
        try:
            out = export_model(*args, **kwargs)
        except StitchError:
            made.append(f"failed after {len(calls)} census(es)")
            raise
        made.append(f"exported after {len(calls)} census(es)")
        return out

    monkeypatch.setattr(rewrite_export, "export_model", exported)
    model = InnerBranchOnlyOneArmReaches().eval()
    x, more = _examples()
    program = stitch.export(model, (x,), examples=more)
    # the unchecked round's export fails on the inner `if`; the rounds with their censuses
    # find it while the outer cond traces the arm no example took (site T1), and export
    # (an export before any census: torch.export of the model as written, which fails)
    after = made[made.index("failed after 1 census(es)") + 1:]
    assert after == [f"exported after {len(calls)} census(es)"] and len(calls) > 1
    inner = [d for d in program.report.decisions if d.function.endswith(".inner")]
    assert [(d.action, d.site) for d in inner] == [(Action.COND, "T1")]
    positive = torch.full((3, 8), 100.0)
    mixed = positive.clone()
    mixed[0, 0] = -1.0
    for inp in (x, positive, mixed):
        torch.testing.assert_close(program(inp), model(inp))


def test_a_program_refused_after_the_unchecked_round_is_made_again_with_every_census(
        monkeypatch):
    """Verification refuses the program of the round with no census of it (simulated here):
    the rounds are taken again with their censuses, and their program is the one returned."""
    from stitch import pipeline
    from stitch.errors import VerificationError

    calls = _counting(monkeypatch)
    finished, refused = pipeline.finished, []

    def refusing_once(exported, finish):
        if not refused:
            refused.append(1)
            raise VerificationError("simulated: the program differs from eager")
        return finished(exported, finish)

    monkeypatch.setattr(pipeline, "finished", refusing_once)
    model = OneBranch().eval()
    x, more = _examples()
    program = stitch.export(model, (x,), examples=more)
    assert refused and len(calls) == 2  # the first census; the rewrite's, on the second try
    for inp in (x, -x * 50, x * 50):
        torch.testing.assert_close(program(inp), model(inp))
