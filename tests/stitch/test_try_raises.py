"""A raise its own ``try`` catches, as the handler run in place (synthesize/canonicalize/
try_raises.py): the rewrite on the source, what it leaves, and exports exact on both sides."""

from __future__ import annotations

import ast
import textwrap

import pytest
import torch

import stitch
from stitch.synthesize.analysis.context import RewriteContext
from stitch.synthesize.canonicalize.try_raises import raises_to_handlers


class Rejected(ValueError):
    pass


def _rewritten(source: str, site_line: int = 4) -> str:
    func = ast.parse(textwrap.dedent(source)).body[0]
    ctx = RewriteContext("<test>", func.name, {}, {site_line},
                         module_globals={"Rejected": Rejected})
    raises_to_handlers(func, ctx)
    return ast.unparse(func)


def test_the_raise_runs_the_handler_and_the_rest_is_its_else():
    out = _rewritten("""
        def f(h):
            try:
                if h.sum() > 0:
                    h = h + 1
                    raise Rejected(f"{h.max().item()}")
                h = h * 2
            except ValueError:
                h = h - 1
            else:
                h = h / 3
            finally:
                h = -h
            return h
        """)
    assert "try" not in out and "raise" not in out
    assert out.split("\n")[1:] == [
        "    if h.sum() > 0:", "        h = h + 1", "        h = h - 1", "    else:",
        "        h = h * 2", "        h = h / 3", "    h = -h", "    return h"]


def test_first_matching_handler_and_nested_ifs():
    out = _rewritten("""
        def f(h):
            try:
                if h.sum() > 0:
                    if h.max() > 5:
                        raise KeyError("big")
                    h = h + 1
                h = h * 2
            except (TypeError, LookupError):
                h = h - 1
            except Exception:
                h = h - 2
            return h
        """)
    assert "h - 2" not in out and "try" not in out
    # the statements after the inner if run only where it did not raise, in both arms
    assert out.count("h = h * 2") == 2 and out.count("h = h - 1") == 1


@pytest.mark.parametrize("source", [
    # the raise is in a loop: leaving the loop is not an if
    """
    def f(h):
        try:
            for i in range(3):
                if h.sum() > i:
                    raise ValueError
        except ValueError:
            h = -h
        return h
    """,
    # no handler catches what is raised
    """
    def f(h):
        try:
            if h.sum() > 0:
                raise KeyError("x")
        except ValueError:
            h = -h
        return h
    """,
    # the handler reads the exception
    """
    def f(h):
        try:
            if h.sum() > 0:
                raise ValueError("x")
        except ValueError as e:
            print(e)
        return h
    """,
    # a bare re-raise in the handler
    """
    def f(h):
        try:
            if h.sum() > 0:
                raise ValueError("x")
        except ValueError:
            h = -h
            raise
        return h
    """,
    # finally beside a return: it runs before leaving
    """
    def f(h):
        try:
            if h.sum() > 0:
                raise ValueError("x")
            return h
        except ValueError:
            h = -h
        finally:
            print("done")
        return h
    """,
])
def test_left_as_written(source):
    assert "try:" in _rewritten(source)


def test_a_try_away_from_every_site_is_left():
    assert "try:" in _rewritten("""
        def f(h):
            h = h + 1
            try:
                if h.sum() > 0:
                    raise ValueError
            except ValueError:
                h = -h
            return h
        """, site_line=3)


class Recovers(torch.nn.Module):
    def forward(self, x):
        h = x * 1.5
        try:
            print(f"mean={h.mean().item():.2f}")
            if (h > 2.0).any():
                raise Rejected(f"too large: {h.shape[0]} rows")
            h = h * 2.0
        except ValueError:
            h = h - 1.0
        return h


def test_export_is_exact_on_both_sides(capsys):
    small, large = torch.full((2, 3), 0.5), torch.full((3, 3), 3.0)
    program = stitch.export(Recovers(), (small,), examples=[((large,), {})])
    assert program.report.graphs_after == 1
    for x in (small, large, torch.linspace(-1, 3, 6).reshape(2, 3), torch.zeros(4, 3)):
        capsys.readouterr()
        expected = Recovers()(x)
        text = capsys.readouterr().out
        torch.testing.assert_close(program(x), expected)
        assert capsys.readouterr().out == text
