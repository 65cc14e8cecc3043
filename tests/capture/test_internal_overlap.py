"""``copy_``'s check for a destination overlapping itself makes no guard at the traced sizes
where it finds no overlap (capture/internal_overlap.py): under ``backed_size_oblivious``
torch 2.14 records ``batch >= 2`` there, refusing batch 1."""

from __future__ import annotations

import pytest
import torch
import torch.fx.experimental._config as fx_config
from torch.export import Dim

import stitch
from capture.internal_overlap import overlap_at_hints

AUTO = {0: Dim.AUTO, 2: Dim.AUTO, 3: Dim.AUTO}


class Keypoints(torch.nn.Module):
    """YOLO's keypoint decoding: every third channel written in place through a slice."""

    def forward(self, x):
        y = x.flatten(2).clone()
        y[:, 2::3] = y[:, 2::3].sigmoid()
        return y * 2


class AreaKeypoints(Keypoints):
    """Areas folded into the batch first (YOLO12's area attention): traced at batch 2, the
    reshape's view algorithm guards batch 1 out unless sizes are reasoned about
    obliviously, which stitch does for an example of batch 1."""

    def forward(self, x):
        b, c, h, w = x.shape
        q = x.flatten(2).transpose(1, 2).reshape(b * 4, h * w // 4, c).softmax(-1)
        x = q.reshape(b, h * w, c).transpose(1, 2).reshape(b, c, h, w)
        return super().forward(x)


def _oblivious_export(model, x):
    with fx_config.patch(backed_size_oblivious=True):
        return torch.export.export(model, (x,), dynamic_shapes=(AUTO,), strict=False)


def test_without_the_fix_torch_guards_batch_1_out():
    """What the fix is for (torch 2.14.1): if this passes, torch no longer needs it."""
    ep = _oblivious_export(Keypoints(), torch.randn(2, 6, 4, 4))
    with pytest.raises(AssertionError, match=r">= 2"):
        ep.module()(torch.randn(1, 6, 4, 4))


@pytest.mark.parametrize("shape", [(1, 6, 4, 4), (2, 6, 4, 4), (3, 6, 5, 7)])
def test_with_the_fix_every_batch_is_served(shape):
    with overlap_at_hints():
        ep = _oblivious_export(Keypoints(), torch.randn(2, 6, 4, 4))
    x = torch.randn(shape)
    torch.testing.assert_close(ep.module()(x), Keypoints()(x), rtol=0, atol=0)


def test_an_overlapping_destination_still_raises():
    class Expanded(torch.nn.Module):
        def forward(self, x):
            y = torch.zeros(1, x.shape[1]).expand(x.shape[0], -1)  # one row, seen twice
            y.copy_(x)
            return y

    with overlap_at_hints(), pytest.raises(Exception, match="single memory location"):
        torch.export.export(Expanded(), (torch.randn(2, 3),), strict=False)


def test_batch_1_first_is_one_program_for_every_batch():
    """The examples YOLO is exported from (batch 1 first): traced at batch 2, exported
    again obliviously for batch 1, one program serves both."""
    model = AreaKeypoints().eval()
    program = stitch.export(model, (torch.randn(1, 6, 4, 4),),
                            examples=[((torch.randn(2, 6, 4, 4),), {}),
                                      ((torch.randn(1, 6, 8, 8),), {})])
    assert "obliviously" in str(program.report)
    for shape in [(1, 6, 4, 4), (2, 6, 4, 4), (1, 6, 8, 8), (3, 6, 8, 4)]:
        x = torch.randn(shape)
        torch.testing.assert_close(program(x), model(x), rtol=0, atol=0)
