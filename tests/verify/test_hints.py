"""What a verification refusal tells the user to change (stitch/verify/hints.py)."""

import pytest
import torch

import stitch
from stitch.verify.hints import tolerance_hint


def test_a_rounding_sized_difference_suggests_a_looser_tolerance():
    expected = torch.randn(4, 8, generator=torch.Generator().manual_seed(0))
    expected[1, 2] = 0.0  # the difference is then exactly the float32 nearest 1.25e-5
    actual = expected.clone()
    actual[1, 2] = 1.25e-5
    hint = tolerance_hint(actual, expected)
    assert "1.25e-05" in hint and "stitch.Settings(atol=0.0001)" in hint


def test_a_large_difference_or_another_shape_suggests_nothing():
    expected = torch.randn(4, 8)
    assert tolerance_hint(expected + 5.0, expected) == ""
    assert tolerance_hint(expected[:2], expected) == ""
    assert tolerance_hint(expected.long(), expected.long()) == ""


class PerImage(torch.nn.Module):
    """One output item per image, as kornia's DISK returns its features."""

    def forward(self, images):
        return [images[i].mean(0) * 2 for i in range(images.shape[0])]


def test_a_guard_on_an_input_whose_output_has_another_structure_says_so():
    model = PerImage()
    with pytest.raises(stitch.StitchError, match="another structure on this input") as caught:
        stitch.export(model, (torch.randn(2, 3, 4, 4),),
                      examples=[((torch.randn(3, 3, 4, 4),), {})])
    assert "3 leaves against 2" in str(caught.value)
