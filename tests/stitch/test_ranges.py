"""The range a loop's count can take, read off its source (synthesize/analysis/ranges.py):
exact where Python's rules fix it whatever the data, None anywhere else."""

from __future__ import annotations

import ast

import pytest

from stitch.synthesize.analysis.ranges import static_range


@pytest.mark.parametrize("source, expected", [
    ("3", (3, 3)),
    ("1 + int(h.mean().item() > 0.5)", (1, 2)),
    ("2 * bool(x.sum())", (0, 2)),
    ("int(not flag) - 1", (-1, 0)),
    ("2 if x.max() > 0 else 5", (2, 5)),
    ("max(1, int(a > b) + int(c > d))", (1, 2)),
    ("min(4, 1 + (a < b))", (1, 2)),
    ("(a > 0) and 3", (0, 3)),
    ("-(x.sum() > 0)", (-1, 0)),
    ("1 + int(x.shape[1] % 8)", (1, 8)),
    ("n % -3", (-2, 0)),
    ("1 + int((h > 2.0).any())", (1, 2)),
    ("int(torch.equal(a, b)) + int(m.all())", (0, 2)),
])
def test_ranges_python_fixes(source, expected):
    assert static_range(ast.parse(source, mode="eval").body) == expected


@pytest.mark.parametrize("source", [
    "n", "int(x.sum().item())", "len(rows)", "1 + k", "int(2.5)", "x.shape[0]",
    "max(1, n)", "int(a > b, 2)", "abs(a > b)", "n % k", "x % 0", "h.sum()", "h.any(0)",
])
def test_no_range_where_the_data_decides(source):
    assert static_range(ast.parse(source, mode="eval").body) is None
