"""A write into a container the function made, inside a data-dependent branch: the arm
rebinds the name to a new container (``canonicalize/container_writes.py``), which the cond
carries; an aliased container keeps its write as written (and the branch is refused, as
torch.cond refuses an arm changing an object made outside it)."""

from __future__ import annotations

import ast
import textwrap

import pytest
import torch

import stitch
from stitch.synthesize.analysis.context import RewriteContext
from stitch.synthesize.canonicalize.container_writes import container_writes


class OptionalKey(torch.nn.Module):
    def forward(self, x):
        h = x.tanh()
        out = {"h": h}
        if h.mean() > 0:
            out["pos"] = h.clamp(min=0)
            out.update({"n": h.sum()})
        return out


class AppendsInArms(torch.nn.Module):
    def forward(self, x):
        parts = [x]
        if x.sum() > 0:
            parts.append(x * 2)
        else:
            parts.extend([x - 1])  # (lists of other lengths by side: one structure each, refused)
        return torch.stack(parts).sum(0), len(parts)


@pytest.mark.parametrize("model", [OptionalKey(), AppendsInArms()])
def test_a_write_into_a_local_container_in_a_branch_is_one_graph(model):
    t = torch.tensor
    sides = [t([1.0, 2.0]), t([-1.0, -2.0]), t([3.0, -0.5]), t([-3.0, 0.5])]
    program = stitch.export(model, (sides[0],), examples=[((sides[1],), {})])
    assert any(d.action.name in ("COND", "WHERE") for d in program.report.decisions)
    for x in sides:
        got, want = program(x), model(x)
        if isinstance(want, dict):
            assert got.keys() == want.keys()
        torch.testing.assert_close(got, want)


def _rewritten(source: str, line: int) -> str:
    func = ast.parse(textwrap.dedent(source)).body[0]
    ctx = RewriteContext.__new__(RewriteContext)
    ctx.dependent_lines = {line}
    container_writes(func, ctx)
    return ast.unparse(func)


def test_only_an_unaliased_container_is_rebound():
    rebound = _rewritten("""
        def f(h):
            out = {"h": h}
            if "h" in out and len(out) == 1:
                pass
            if h.sum() > 0:
                out["k"] = h
            return out
    """, 6)
    assert "out = {**out, 'k': h}" in rebound
    for aliased in ("keep = out", "g(out)", "self.cache = out"):
        kept = _rewritten(f"""
            def f(self, h, g):
                out = {{"h": h}}
                {aliased}
                if h.sum() > 0:
                    out["k"] = h
                return out
        """, 5)
        assert "out['k'] = h" in kept, aliased
    in_a_loop = _rewritten("""
        def f(self, xs):
            out = {}
            for x in xs:
                if x.sum() > 0:
                    out["k"] = x
                self.last = out
            return out
    """, 5)
    assert "out['k'] = x" in in_a_loop  # the next pass of the loop sees self.last
    parameter = _rewritten("""
        def f(out, h):
            if h.sum() > 0:
                out["k"] = h
            return out
    """, 3)
    assert "out['k'] = h" in parameter
    pairs = _rewritten("""
        def f(h):
            out = {}
            if h.sum() > 0:
                out.update([("k", h)])
                out.update({"j": h})
            return out
    """, 4)
    assert "out.update([('k', h)])" in pairs and "out = {**out, **{'j': h}}" in pairs
