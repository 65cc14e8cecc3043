"""A ``while`` on data that counts its iterations in a Python int and makes calls in its body
(synthesize/convert/bounded_while.py): at most B iterations by the counter, so B tests,
each iteration a cond whose calls are replayed when it ran, with the numbers it read."""

from __future__ import annotations

import ast
import logging

import pytest
import torch

import stitch
from stitch.synthesize.convert.bounded_while import trip_bound

LOG = logging.getLogger("tests.bounded_while")


class Refine(torch.nn.Module):
    """Refine while the mean is high, at most three times, printing and logging each pass."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def forward(self, x):
        h = x * 1.5
        k = 0
        while h.mean() > 0.5 and k < 3:
            print(f"pass {k}: mean={h.mean().item():.3f}")
            LOG.info("pass %d", k)
            self.seen.append(h.sum())
            h = h * 2.0 - 1.5
            k += 1
        return h, k


def _eager_and_program(program, model, x, capsys, caplog):
    """(outputs, printed text, log messages, appended values) of eager, then the program."""
    out = []
    model.seen.clear()
    for fn, owner in ((eager := Refine(), eager), (program, model)):
        capsys.readouterr()
        caplog.clear()
        with caplog.at_level(logging.INFO, logger=LOG.name):
            result = fn(x)
        out.append((result, capsys.readouterr().out, [r.getMessage() for r in caplog.records],
                    list(owner.seen)))
    return out


@pytest.mark.parametrize("level", [0.0, 0.6, 1.0, 3.0])  # 0, 1, 2 and 3 passes
def test_each_pass_replays_its_calls(level, capsys, caplog):
    model = Refine()
    program = stitch.export(model, (torch.full((2, 3), 0.1),),
                            examples=[((torch.full((3, 3), 2.0),), {})])
    assert program.report.graphs_after == 1
    x = torch.full((4, 3), level)
    (expected, text, logs, seen), (actual, got_text, got_logs, got_seen) = _eager_and_program(
        program, model, x, capsys, caplog)
    torch.testing.assert_close(actual[0], expected[0])
    assert int(actual[1]) == expected[1]
    assert got_text == text and got_logs == logs
    assert text.count("pass") == expected[1] == len(seen)
    assert len(got_seen) == len(seen)
    for a, b in zip(got_seen, seen, strict=True):
        torch.testing.assert_close(a, b)


def _loop(source: str) -> tuple[ast.While, list[ast.stmt]]:
    body = ast.parse(source).body
    i = next(i for i, s in enumerate(body) if isinstance(s, ast.While))
    return body[i], body[:i]


@pytest.mark.parametrize("source, bound", [
    ("k = 0\nwhile p and k < 3:\n    k += 1", 3),
    ("k = 0\nwhile 3 > k and p:\n    k = k + 1", 3),
    ("k = 1\nwhile p and k <= 4:\n    k += 1", 4),
    ("k = 0\nwhile p and k < 7:\n    k += 2", 4),
    ("k = 0\nwhile (p and q) and k < 2 and j < 9:\n    k += 1", 2),
    ("k = 0\nwhile p and k < 1 + int(q > 0):\n    k += 1", 2),
])
def test_the_counter_bounds_the_trips(source, bound):
    assert trip_bound(*_loop(source)) == bound


@pytest.mark.parametrize("source", [
    "while p and k < 3:\n    k += 1",  # no start the source fixes
    "k = n\nwhile p and k < 3:\n    k += 1",
    "k = 0\nwhile p or k < 3:\n    k += 1",  # not required by the test
    "k = 0\nwhile p and k < 3:\n    if q:\n        k += 1",  # not every iteration
    "k = 0\nwhile p and k < 3:\n    k += 1\n    if q:\n        continue",
    "k = 0\nwhile p and k < 3:\n    k += 1\n    k = 0",  # bound again
    "k = 0\nwhile p and k < 3:\n    k += s",  # a step the source does not fix
    "k = 0\nwhile p and k < n:\n    k += 1",
])
def test_no_bound_where_the_counter_does_not_fix_one(source):
    assert trip_bound(*_loop(source)) is None


class Counts(torch.nn.Module):
    """A counter attribute and a list rebuilt in each pass: what a while_loop cannot carry."""

    def __init__(self):
        super().__init__()
        self.n = 0

    def forward(self, x):
        h = x
        k = 0
        parts = [h, h]
        while h.abs().mean() > 0.2 and k < 4:
            self.n += 1
            parts = [h * 2.0, h + 1.0]
            h = h * 0.5
            k += 1
        return parts[0] + parts[1]


def test_counters_and_containers_follow_the_passes():
    model = Counts()
    program = stitch.export(model, (torch.full((2, 3), 0.1),),
                            examples=[((torch.full((3, 3), 2.0),), {})])
    assert program.report.graphs_after == 1
    eager = Counts()
    for level in (0.0, 0.3, 0.5, 9.0):  # 0, 1, 2 and 4 passes
        x = torch.full((4, 3), level)
        model.n = eager.n = 5
        torch.testing.assert_close(program(x), eager(x))
        assert model.n == eager.n


class AppendsWhileSizesInABranch(torch.nn.Module):
    """The loop on sizes and a counter inside a branch on data: the trips follow the size.
    Forcing a side of the loop's test (verification) must not run a pass past the
    counter's bound, which no input can run: the B passes' tests are the only ones."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def forward(self, x):
        h = x * 1.5
        if h[:, -1].max() > -5.0:
            k = 0
            while any(s % 4 != 0 for s in h.shape) and k < 3:
                self.seen.append(h.max())
                h = h - 1.0
                k += 1
        else:
            h = -h
        return h


def test_a_loop_on_sizes_in_a_data_branch_is_exact_forced_on_every_side():
    model = AppendsWhileSizesInABranch()
    shapes = [(4, 8), (6, 8), (5, 8), (4, 12)]
    program = stitch.export(model, (torch.rand(shapes[0]),),
                            examples=[((torch.rand(s),), {}) for s in shapes[1:]])
    for shape in [*shapes, (3, 7), (8, 8), (2, 4)]:
        for sign in (1.0, -1.0):
            x = sign * (torch.rand(shape) + 4.0)
            model.seen.clear()
            want, seen = model(x), list(model.seen)
            model.seen.clear()
            torch.testing.assert_close(program(x), want)
            assert len(model.seen) == len(seen)
            for a, b in zip(model.seen, seen, strict=True):
                torch.testing.assert_close(a, b)
