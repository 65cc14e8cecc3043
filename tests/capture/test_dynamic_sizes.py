"""A fake kernel that sizes its result with the deprecated ``ctx.create_unbacked_symint()``
(min 2 by default; torchvision's NMS does) made every exported program raise on an input
whose result has one row: ``Runtime assertion failed for expression u0 >= 2``. While stitch
traces, such sizes count from 0 (capture/dynamic_sizes.py)."""

from __future__ import annotations

import functools
import warnings

import pytest
import torch
from torch import nn
from torch._library.fake_impl import FakeImplCtx

import stitch
from capture import dynamic_sizes
from capture.dynamic_sizes import sizes_from_zero

_LIB = torch.library.Library("stitch_test_sizes", "DEF")
_LIB.define("positive_rows(Tensor x) -> Tensor")
torch.library.impl(_LIB, "positive_rows", "CompositeExplicitAutograd")(
    lambda x: (x[:, 0] > 0).nonzero()[:, 0])


@torch.library.register_fake("stitch_test_sizes::positive_rows", lib=_LIB)
def _positive_rows_fake(x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # the deprecated API, on purpose
        n = torch.library.get_ctx().create_unbacked_symint()
    return x.new_empty(n, dtype=torch.long)


class KeepsPositiveRows(nn.Module):
    def forward(self, x):
        return x[torch.ops.stitch_test_sizes.positive_rows(x)] * 2


def _with_positive_rows(k: int, n: int = 6) -> torch.Tensor:
    x = -torch.rand(n, 3) - 0.1
    x[:k, 0] = 1.0
    return x


def test_a_result_of_one_row_is_taken():
    model = KeepsPositiveRows()
    program = stitch.export(model, (_with_positive_rows(3),), examples=[
        ((_with_positive_rows(4),), {})])
    for k in (0, 1, 2, 5):
        x = _with_positive_rows(k)
        torch.testing.assert_close(program(x), model(x))


def test_an_explicit_min_is_kept_and_the_patch_is_undone():
    seen = []

    class Ctx:
        def new_dynamic_size(self, *, min=0, max=None):  # noqa: A002
            seen.append((min, max))

    with sizes_from_zero(), sizes_from_zero():  # re-entrant
        FakeImplCtx.create_unbacked_symint(Ctx())
        FakeImplCtx.create_unbacked_symint(Ctx(), min=3, max=9)
    assert seen == [(0, None), (3, 9)]
    assert FakeImplCtx.create_unbacked_symint is dynamic_sizes._ORIGINAL


class Detect(nn.Module):
    def forward(self, boxes, scores, labels):
        import torchvision

        kept = scores > 0.5
        return torchvision.ops.batched_nms(boxes[kept], scores[kept], labels[kept], 0.5)


def _detections(kept: int, n: int = 40, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(n, 2, generator=g) * 200
    boxes = torch.cat([xy, xy + torch.rand(n, 2, generator=g) * 40 + 1], 1)
    scores = torch.rand(n, generator=g) * 0.5
    scores[:kept] += 0.5
    return boxes, scores, torch.randint(0, 4, (n,), generator=g)


@functools.cache
def _nms_program():
    pytest.importorskip("torchvision")  # installed by make install
    return stitch.export(Detect(), _detections(12), examples=[(_detections(20, seed=1), {})])


@pytest.mark.parametrize("backend", ["eager", "inductor", "aoti"])
def test_torchvision_nms_keeping_one_box(backend):
    compiled = stitch.compile(_nms_program(), backend)
    for kept in (1, 0, 2, 15):
        inputs = _detections(kept, seed=kept)
        with torch.no_grad():
            got, want = compiled(*inputs), Detect()(*inputs)
        assert got.shape == want.shape and torch.equal(got, want), kept
