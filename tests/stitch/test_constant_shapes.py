"""Shapes computed as small tensors of constants and read back (TAPAS 4.52's segmented
reduce: ``torch.as_tensor([index.num_segments])``, ``torch.cat`` of sizes, ``.tolist()`` into
``view``). torch.export fails twice on it: ``as_tensor`` of a list holding a tensor reads a
value its fake tensor does not hold, and ``.tolist()`` of a tensor of more than one element
is a size from data. While stitch traces, ``as_tensor``/``tensor`` of 0-d tensors is their
stack, and fake tensors keep the values of small tensors computed from constants alone
(``synthesize/operators/shims.py``)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import stitch
import stitch.synthesize.operators.shims as shims
from stitch.synthesize.operators.shims import _as_tensor, _tensor, shimmed


class SegmentMin(nn.Module):
    """The minimum of ``values`` per segment of each row, written as TAPAS writes it."""

    def __init__(self, num_segments: int = 4) -> None:
        super().__init__()
        self.num_segments = num_segments

    def forward(self, values, index):
        num_segments = torch.as_tensor(self.num_segments)  # a 0-d tensor of a constant
        offset = torch.arange(values.shape[0])[:, None] * num_segments
        flat_index = (index + offset).view(-1)
        out = torch.zeros(int(num_segments) * values.shape[0])
        reduced = out.scatter_reduce(0, flat_index, values.reshape(-1), "amin",
                                     include_self=False)
        shape = torch.cat([torch.as_tensor([-1]), torch.as_tensor([num_segments])])
        return reduced.view(shape.tolist()) * 2


def _inputs(batch: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, 6, generator=g), torch.randint(0, 4, (batch, 6), generator=g)


def test_shapes_from_constants_are_one_graph():
    model = SegmentMin().eval()
    with pytest.raises(Exception, match="not allocated|data-dependent"):  # the premise
        torch.export.export(model, _inputs(2, 0), strict=False)
    program = stitch.export(model, _inputs(2, 0), examples=[(_inputs(3, 1), {})])
    assert program.report.graphs_after == 1, str(program.report)
    for batch, seed in ((2, 0), (3, 1), (5, 2), (1, 3)):  # the batch stays dynamic
        args = _inputs(batch, seed)
        torch.testing.assert_close(program(*args), model(*args), rtol=0, atol=0)
    assert torch.as_tensor is not _as_tensor and torch.tensor is not _tensor


@pytest.mark.parametrize("left_out", [("as_tensor", "tensor"), ("CONSTANT_NUMEL_LIMIT",)])
def test_each_part_is_needed(monkeypatch, left_out):
    monkeypatch.setattr(shims, "SHIMS", tuple(s for s in shims.SHIMS if s.attr not in left_out))
    with pytest.raises(stitch.StitchError):
        stitch.export(SegmentMin().eval(), _inputs(2, 0), examples=[(_inputs(3, 1), {})])


def test_the_shims_give_what_eager_gives():
    int32, grad = torch.tensor(3, dtype=torch.int32), torch.tensor(2.5, requires_grad=True)
    assert not shims._stackable([grad], None, None)  # eager warns: the original
    cases = [([int32, int32 + 1], {}), ([torch.tensor(1.5, dtype=torch.float64)], {}),
             ((int32,), {}), ([int32], {"dtype": torch.float32}), ([int32], {"device": "cpu"})]
    with shimmed():
        assert torch.as_tensor is _as_tensor and torch.tensor is _tensor
        for data, kwargs in cases:
            for shim, original in ((_as_tensor, shims._original_as_tensor),
                                   (_tensor, shims._original_tensor)):
                got, want = shim(data, **kwargs), original(data, **kwargs)
                assert got.dtype == want.dtype and got.device == want.device
                assert not got.requires_grad and got.data_ptr() != data[0].data_ptr()
                torch.testing.assert_close(got, want, rtol=0, atol=0)
        # what the stack does not cover goes to the original
        assert not shims._stackable([int32, 4], None, None)  # a Python number among them
        assert not shims._stackable([int32, int32.long()], None, None)  # two dtypes
        assert not shims._stackable([torch.tensor([1])], None, None)  # not 0-d
        assert not shims._stackable([int32], None, "meta")  # another device
        assert not shims._stackable([], None, None)
        assert not shims._stackable([torch.tensor(1j)], None, None)  # complex
        assert torch.tensor([1.0, 2.0]).tolist() == [1.0, 2.0]
        assert torch.tensor([int32], requires_grad=False).tolist() == [3]
        import torch._subclasses.fake_tensor as fake_tensor
        assert fake_tensor.CONSTANT_NUMEL_LIMIT == shims.CONSTANT_NUMEL_LIMIT
    assert torch.as_tensor is not _as_tensor
    assert fake_tensor.CONSTANT_NUMEL_LIMIT == 1  # torch's own value is back


class TensorOfARead(torch.nn.Module):
    def forward(self, x):
        v = x.mean().item()
        return torch.tensor([v, 1.0])


def test_a_tensor_of_symbolic_numbers_exports_as_torch_export_does():
    """torch.export sends ``torch.tensor`` of an unbacked float (``[v.item(), 1.0]``) to
    its Python implementation, recognised by identity: with the shim installed it met the
    C one, guarded on the value, and stitch refused a model plain torch.export exports."""
    x = torch.tensor([1.5, 2.0, 3.0])
    program = stitch.export(TensorOfARead(), (x,))
    for t in (x, -x, x * 0):
        torch.testing.assert_close(program(t), TensorOfARead()(t))
