"""Batch norm in inference over rows known only at run time (Faster R-CNN v2's box head
normalises the rois NMS kept): the composite ``F.batch_norm`` tests ``numel() == 0`` first,
a guard neither torch.export nor Dynamo can make on such a size. While stitch traces, an
exact shim calls the inference op directly (``synthesize/operators/shims.py``)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import stitch
from stitch.synthesize.operators.shims import _batch_norm, shimmed


class KeptRowsNorm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.head = nn.Linear(4 * 3 * 3, 2)

    def forward(self, x, scores):
        rows = x[scores > 0.5]  # a count from data
        h = torch.relu(self.bn(self.conv(rows)))
        return self.head(h.flatten(1))


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    m = KeptRowsNorm().eval()
    m.bn.running_mean.normal_()
    m.bn.running_var.uniform_(0.5, 2.0)
    return m


def test_batch_norm_over_rows_from_data_is_one_graph(model):
    x, scores = torch.randn(6, 4, 3, 3), torch.tensor([0.9, 0.1, 0.7, 0.2, 0.6, 0.3])
    with pytest.raises(Exception, match="data-dependent"):  # the premise
        torch.export.export(model, (x, scores), strict=False)
    program = stitch.export(model, (x, scores), examples=[((x, scores.flip(0) * 0.5), {})])
    assert program.report.graphs_after == 1, str(program.report)
    ops = str(program.exported_program.graph_module.code)
    assert "_native_batch_norm_legit_no_training" in ops
    with torch.no_grad():
        for s in (scores, torch.zeros(6), torch.ones(6), scores.flip(0)):  # 3, 0, 6, 3 rows
            torch.testing.assert_close(program(x, s), model(x, s), rtol=0, atol=0)
    assert F.batch_norm is not _batch_norm  # the user's F is back


class KeptRowsNorm1d(nn.Module):
    """Another layout: BatchNorm1d over kept feature rows, through ``nn.functional`` too."""

    def __init__(self) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(5)

    def forward(self, feats, scores):
        rows = feats[scores > 0.5]
        h = self.bn(rows)
        return F.batch_norm(h, self.bn.running_mean, self.bn.running_var, eps=1e-3) * 2


def test_batch_norm_1d_and_the_functional_form_over_rows_from_data():
    torch.manual_seed(2)
    model = KeptRowsNorm1d().eval()
    model.bn.running_var.uniform_(0.5, 2.0)
    feats, scores = torch.randn(6, 5), torch.tensor([0.9, 0.1, 0.7, 0.2, 0.6, 0.3])
    program = stitch.export(model, (feats, scores), examples=[((feats, 1 - scores), {})])
    assert program.report.graphs_after == 1, str(program.report)
    with torch.no_grad():
        for s in (scores, torch.zeros(6), torch.ones(6)):
            torch.testing.assert_close(program(feats, s), model(feats, s), rtol=0, atol=0)


def test_the_shim_gives_what_batch_norm_gives():
    torch.manual_seed(1)
    x, mean, var = torch.randn(5, 3, 2), torch.randn(3), torch.rand(3) + 0.5
    w, b = torch.randn(3), torch.randn(3)
    with shimmed():
        assert F.batch_norm is _batch_norm
        for rows in (x, x[:0]):
            got = F.batch_norm(rows, mean, var, w, b, False, 0.1, 1e-5)
            with_original = torch.batch_norm(rows, w, b, mean, var, False, 0.1, 1e-5, False)
            torch.testing.assert_close(got, with_original, rtol=0, atol=0)
        # training, or no running statistics: the original, which updates the statistics
        run_mean = mean.clone()
        F.batch_norm(x, run_mean, var.clone(), w, b, True, 0.1, 1e-5)
        assert not torch.equal(run_mean, mean)
        assert F.batch_norm(x, None, None, training=True).shape == x.shape
    assert F.batch_norm is not _batch_norm
