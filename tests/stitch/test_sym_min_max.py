"""``min``/``max`` of floats made from sizes (kornia's LAF normalisation:
``min(float(h - 1), float(w - 1))``) are ``torch.sym_min``/``sym_max`` while stitch traces,
not a guard on which side is longer: the program takes tall and wide images alike."""

from __future__ import annotations

import torch
from torch import nn

import stitch
from stitch.synthesize.operators.sym_min_max import min_max


class Normalised(nn.Module):
    def forward(self, points, image):
        _, _, h, w = image.shape
        wf, hf = float(w - 1), float(h - 1)
        scale = min(hf, wf)
        span = max([hf, wf]) + max(hf, wf, 1.0)  # a list, and more than two numbers
        return points / scale + span * image.mean()


def test_a_program_from_wide_images_takes_tall_ones():
    torch.manual_seed(0)
    wide = (torch.randn(2, 5, 2), torch.rand(1, 1, 40, 64))
    wider = (torch.randn(2, 5, 2), torch.rand(1, 1, 32, 72))
    model = Normalised()
    program = stitch.export(model, wide, examples=[(wider, {})])
    assert "SIZE GUARDS" not in str(program.report)
    for image in (torch.rand(1, 1, 64, 40), torch.rand(1, 1, 50, 50), torch.rand(1, 1, 9, 70)):
        points = torch.randn(2, 5, 2)
        torch.testing.assert_close(program(points, image), model(points, image))


def test_other_operands_keep_torch_and_python_rules():
    def call(*args, pick=min):
        return min_max(*args, real_callable=pick,
                       tensor_callable=torch.minimum if pick is min else torch.maximum)

    assert call(1, 2.5) == 1 and type(call(1, 2.5)) is int  # Python's operand, its type
    assert call(3.0, 2.0, pick=max) == 3.0
    assert call([4.0, 1.5, 2.0]) == 1.5
    t = torch.tensor([1.0, 5.0])
    torch.testing.assert_close(call(t, torch.tensor([2.0, 2.0])), torch.tensor([1.0, 2.0]))
