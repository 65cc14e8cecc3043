"""Writes into a local container nothing reads are dead (``canonicalize/dead_writes.py``): a
decode loop that keeps its tokens in a list it never reads becomes one ``torch.while_loop``;
a container read anywhere else keeps every write."""

from __future__ import annotations

import ast
import textwrap

import pytest
import torch

import stitch
from stitch.synthesize.canonicalize.dead_writes import dead_writes


class GreedyDecode(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = torch.nn.Embedding(6, 8)
        self.out = torch.nn.Linear(8, 6)

    def forward(self, tok):
        h = self.emb(tok)
        finished = torch.zeros(tok.shape[0], dtype=torch.bool)
        steps, debug = [], {}
        step = 0
        while not finished.all() and step < 5:
            nxt = self.out(h).argmax(-1)
            steps.append(nxt)
            debug["last"] = nxt
            finished = finished | (nxt == 0)
            h = h + self.emb(nxt)
            step += 1
        return h, step


def test_a_decode_loop_growing_an_unread_list_is_one_graph():
    model = GreedyDecode()
    t = torch.tensor
    program = stitch.export(model, (t([1, 2, 3]),), examples=[((t([0, 5]),), {})])
    assert any("while" in d.action.name.lower() for d in program.report.decisions)
    for tok in (t([1, 2, 3]), t([0, 5]), t([4, 4, 1, 2]), t([3])):
        (got_h, got_n), (want_h, want_n) = program(tok), model(tok)
        torch.testing.assert_close(got_h, want_h)
        assert got_n == want_n


def _rewritten(source: str) -> str:
    func = ast.parse(textwrap.dedent(source)).body[0]
    dead_writes(func, None)
    return ast.unparse(func)


def test_only_writes_nothing_can_read_are_dropped():
    dropped = _rewritten("""
        def f(x, g):
            seen, d = [], {}
            for i in range(3):
                seen.append(g(x))
                d["k"] = x.sum()
            return x
    """)
    assert "seen.append" not in dropped and "d['k']" not in dropped
    assert "g(x)" in dropped  # what the write stored is still evaluated, where it may act
    assert "x.sum()" not in dropped  # and left out where it can neither raise nor act


@pytest.mark.parametrize("use", [
    "return seen",                 # returned
    "h = len(seen)",               # read
    "self.seen = seen",            # stored
    "g(seen)",                     # handed on
    "seen.append(len(seen))",      # read by its own write
    "h = lambda: seen",            # a closure refers to it
    "h = locals()",                # introspection
])
def test_a_container_read_anywhere_keeps_its_writes(use):
    kept = _rewritten(f"""
        def f(self, x, g):
            seen = []
            seen.append(x)
            {use}
            return x
    """)
    assert "seen.append(x)" in kept, use


def test_writes_that_can_raise_are_kept():
    kept = _rewritten("""
        def f(x, k):
            seen, d = [], {}
            seen[0] = x
            d[k] = x
            seen.append(x, 1)
            return x
    """)
    assert "seen[0] = x" in kept and "d[k] = x" in kept and "seen.append(x, 1)" in kept
