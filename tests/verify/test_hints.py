"""What a verification refusal tells the user to change (stitch/verify/hints.py)."""

import torch

from stitch.verify.hints import tolerance_hint


def test_a_rounding_sized_difference_suggests_a_looser_tolerance():
    expected = torch.randn(4, 8)
    actual = expected.clone()
    actual[1, 2] += 1.25e-5
    hint = tolerance_hint(actual, expected)
    assert "1.25e-05" in hint and "stitch.Settings(atol=0.0001)" in hint


def test_a_large_difference_or_another_shape_suggests_nothing():
    expected = torch.randn(4, 8)
    assert tolerance_hint(expected + 5.0, expected) == ""
    assert tolerance_hint(expected[:2], expected) == ""
    assert tolerance_hint(expected.long(), expected.long()) == ""
