"""A model that returns (or takes) a dataclass of tensors: torch.export refuses a type its
pytree does not know, so stitch registers a dataclass by its ``__init__`` fields, those nested
in it too (kornia's ``DISKFeatures``), and ``stitch.load`` registers it the same way in a
process that only imported its module (stitch/pytree_types.py)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.utils._pytree as pytree

import stitch
from stitch.pytree_types import register, unregistered


@dataclass
class Scores:
    values: torch.Tensor
    best: torch.Tensor


@dataclass
class Features:
    keypoints: torch.Tensor
    scores: Scores
    count: int = 0


class Detector(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # a data-dependent branch: stitch makes it a cond
            x = x * 2
        return Features(x.abs(), Scores(x.mean(1), x.amax(1)), x.shape[1])


@dataclass
class NotYetKnown:
    a: torch.Tensor


def test_a_dataclass_output_and_the_one_inside_it_are_registered():
    program = stitch.export(Detector(), (torch.randn(3, 4),),
                            examples=[((-torch.rand(5, 4),), {})])
    assert {Features, Scores} <= set(pytree.SUPPORTED_NODES)
    assert any("Features" in n and "Scores" in n for n in program.report.notes), \
        program.report.notes
    for x in (torch.randn(2, 4), -torch.rand(6, 4)):
        got, want = program(x), Detector()(x)
        assert type(got) is Features and type(got.scores) is Scores
        torch.testing.assert_close(pytree.tree_leaves(got), pytree.tree_leaves(want))


def test_a_dataclass_an_artifact_names_is_registered_by_its_name():
    name = f"{__name__}.NotYetKnown"
    assert unregistered(NotYetKnown(torch.ones(1))) == [name]
    register([name])
    assert NotYetKnown in pytree.SUPPORTED_NODES
    assert unregistered(NotYetKnown(torch.ones(1))) == []
