"""Post-processing patterns of detection models (torchvision's RetinaNet/FCOS/SSD batched
NMS), each general: a loop over a tensor whose length comes from data, a size from data
tested together with a Python flag, a constant float read by an op that takes only a
Python float, a function behind a wrapper Dynamo unwraps itself, and warnings a kernel
raises while torch traces it."""

from __future__ import annotations

import functools
import warnings

import pytest
import torch
from torch import nn

import stitch

# an op that takes only a Python float (torchvision's NMS threshold is one), with a fake
# kernel that warns while torch traces it (torchvision's NMS meta kernel does)
_LIB = torch.library.Library("stitch_test_det", "DEF")
_LIB.define("scaled(Tensor x, float alpha) -> Tensor")
torch.library.impl(_LIB, "scaled", "CompositeExplicitAutograd")(lambda x, alpha: x * alpha)


@torch.library.register_fake("stitch_test_det::scaled", lib=_LIB)
def _scaled_fake(x, alpha):
    warnings.warn("a fake kernel's own warning, raised while tracing", FutureWarning,
                  stacklevel=2)
    return torch.empty_like(x)


def _data_loop(scores, labels, threshold: float):
    """Per label, the best score's index kept (a Python loop over torch.unique)."""
    keep = torch.zeros_like(scores, dtype=torch.bool)
    for label in torch.unique(labels):
        rows = torch.where(labels == label)[0]
        keep[rows[scores[rows].topk(1).indices]] = True
    return torch.ops.stitch_test_det.scaled(scores[keep], threshold)


def _script_if_tracing_style(fn):
    """A wrapper like torch.jit._script_if_tracing: Dynamo traces ``__original_fn``."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    wrapper.__original_fn = fn
    wrapper.__script_if_tracing_wrapper = True
    return wrapper


@_script_if_tracing_style
def _small_path(scores, labels, threshold: float):
    if scores.numel() == 0:
        return scores.new_zeros(0)
    return torch.ops.stitch_test_det.scaled(scores, threshold) + labels.to(scores.dtype)


def _flag() -> bool:
    return False


class Selects(nn.Module):
    """Scores above a cut, then one of two exact paths chosen by how many there are."""

    def __init__(self, cut: float = 0.5, limit: int = 6) -> None:
        super().__init__()
        self.cut, self.limit, self.threshold = cut, limit, 0.25

    def forward(self, scores, labels):
        kept = scores > self.cut
        s, lab = scores[kept], labels[kept]
        if s.numel() > self.limit and not _flag():
            return _data_loop(s, lab, self.threshold)
        return _small_path(s, lab, self.threshold)


def _inputs(n: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, generator=g), torch.randint(0, 3, (n,), generator=g)


@pytest.fixture(scope="module")
def program():
    model = Selects()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return stitch.export(model, _inputs(12, 0), examples=[(_inputs(12, 1), {})])


def test_one_graph_with_a_while_loop_over_the_labels(program):
    actions = {d.action.value for d in program.report.decisions}
    assert {"torch.cond", "torch.while_loop"} <= actions
    assert program.report.graph_ops.get("while_loop") == 1
    loop = next(d for d in program.report.decisions if d.action.value == "torch.while_loop")
    assert "over a tensor's rows" in loop.reason and "keep" in loop.reason
    # each side of the size branch is verified: the one an example takes by that example,
    # the other forced
    assert sum("forced" in c.what for c in program.report.checks) >= 1


def test_exact_on_inputs_taking_each_path(program):
    model = Selects()
    for seed, n in [(2, 12), (3, 12), (4, 12), (5, 12)]:
        scores, labels = _inputs(n, seed)
        for s in (scores, scores * 0.4, scores * 0.4 + 0.6):  # few, none, all kept
            torch.testing.assert_close(program(s, labels), model(s, labels))


def test_no_kernel_warning_is_replayed(program):
    assert not any(e.kind == "warn" for e in program.epilogue.entries)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program(*_inputs(12, 7))
    assert not caught


class ReadsAfterTheLoop(nn.Module):
    def forward(self, scores, labels):
        s = scores[scores > 0.5]
        total = torch.zeros(())
        for label in torch.unique(labels[scores > 0.5]):
            last = s[:1] * label
            total = total + last.sum()
        return total + last.sum()  # bound in the loop, read after it


def test_a_name_bound_in_the_loop_and_read_after_it_is_named():
    with pytest.raises(stitch.StitchError) as info:
        stitch.export(ReadsAfterTheLoop(), _inputs(12, 0))
    text = str(info.value)
    assert "last bound in the loop is read after it" in text


def test_torchvision_batched_nms_both_paths_exact():
    torchvision = pytest.importorskip("torchvision")  # installed by make install

    class Detect(nn.Module):
        def forward(self, boxes, scores, labels):
            kept = scores > 0.05
            return torchvision.ops.batched_nms(boxes[kept], scores[kept], labels[kept], 0.5)

    def make(n, seed):
        g = torch.Generator().manual_seed(seed)
        xy = torch.rand(n, 2, generator=g) * 200
        boxes = torch.cat([xy, xy + torch.rand(n, 2, generator=g) * 40 + 1], 1)
        return boxes, torch.rand(n, generator=g), torch.randint(0, 4, (n,), generator=g)

    n = 1100  # 4 * 1100 > 4000: the per-class (vanilla) path is reachable
    program = stitch.export(Detect(), make(n, 0), examples=[(make(n, 1), {})])
    assert program.report.graph_ops.get("while_loop") == 1
    for seed in (2, 3):
        boxes, scores, labels = make(n, seed)
        for s in (scores, scores * 0.06):  # most kept (vanilla), few kept (coordinate trick)
            torch.testing.assert_close(program(boxes, s, labels), Detect()(boxes, s, labels))


class RankBySize(nn.Module):
    """torchvision's BoxCoder.decode: a reshape only when a size from data is not zero, so the
    two sides give tensors of different ranks (torch.cond takes one rank)."""

    def forward(self, scores, labels):
        rows = scores[scores > 0.5].reshape(-1, 1).repeat(1, 4)
        n = rows.shape[0]
        if n > 0:
            rows = rows.reshape(n, -1, 2)
        return rows.sum(-1)


def test_a_cond_that_fails_to_trace_is_refused_with_torchs_reason():
    with pytest.raises(stitch.GuardsRefusedError) as info:
        stitch.export(RankBySize(), _inputs(12, 0))
    text = str(info.value)
    assert "torch.cond over both branches failed to trace" in text
    assert "expected same dim but got 3 and 2" in text  # one cond
    assert "with the rest of the function in each arm" in text  # then its continuation
    assert "test_detection_patterns.py" in text  # the line of the if


def test_guards_on_request_give_one_graph_for_it():
    program = stitch.export(RankBySize(), _inputs(12, 0),
                            settings=stitch.Settings(allow_guards=True))
    assert any(d.action.value == "guarded" for d in program.report.decisions)
    torch.testing.assert_close(program(*_inputs(12, 3)), RankBySize()(*_inputs(12, 3)))


class RankAgreesLater(nn.Module):
    """Sides of different ranks that the rest of the function brings back to one rank: the
    rest goes into each arm (a continuation), one cond."""

    def forward(self, scores, labels):
        rows = scores[scores > 0.5].reshape(-1, 1).repeat(1, 4)
        n = rows.shape[0]
        if n > 0:
            rows = rows.reshape(n, -1, 2)
        return rows.reshape(-1, 2).sum(-1) * 2


def test_sides_of_different_ranks_take_the_rest_of_the_function():
    program = stitch.export(RankAgreesLater(), _inputs(12, 0))
    cond = next(d for d in program.report.decisions if d.action.value == "torch.cond")
    assert "the rest of the function became each branch's continuation" in cond.reason
    assert "expected same dim" in cond.reason
    model = RankAgreesLater()
    for seed in (3, 4):
        scores, labels = _inputs(12, seed)
        for s in (scores, scores * 0.4):  # some kept, none kept (the n == 0 side)
            torch.testing.assert_close(program(s, labels), model(s, labels))


class LoopReadsAKeptCount(nn.Module):
    def forward(self, x):
        kept = x[(x[:, 0] > 0).nonzero()[:, 0]]
        n = kept.shape[0]  # known only at run time (unbacked), read in the loop's body
        acc = torch.zeros(())
        for _ in range(int((x[:, 1] > 0).sum())):
            acc = acc * 0.5 + n
        return acc


def test_a_loop_body_reading_a_count_known_only_at_run_time():
    # torch.while_loop's own Dynamo pass (torch.export, not strict) lifts the count
    model = LoopReadsAKeptCount()
    x = torch.randn(6, 4, generator=torch.Generator().manual_seed(1))
    program = stitch.export(model, (x,), examples=[((-x,), {}), ((x * 2,), {})])
    assert program.report.graphs_after == 1 and program.report.graph_ops.get("while_loop") == 1
    for v in (x, -x, x.flip(0), torch.zeros(6, 4)):
        assert torch.equal(program(v), model(v))
