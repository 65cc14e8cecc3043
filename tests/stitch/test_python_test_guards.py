"""A branch the converter could only specialise (its other side holds a call that may warn,
inside an assignment) is no guard when its test is a test of Python values: while
torch.export traces it, the test is a Python bool, which torch.export decides alike. The
shape is torch-geometric's ``to_dense_batch``: an early return on ``batch is None``, then
sizes read from data and a helper that warns on a path the examples never take."""

from __future__ import annotations

import inspect
import warnings

import pytest
import torch

import stitch
from stitch.plan.decisions import Action


def _count(index, size):
    if index.is_cuda and index.requires_grad:
        warnings.warn("the slow path on this device", stacklevel=2)
    return torch.zeros(size, dtype=torch.long).index_add(0, index, torch.ones_like(index))


def _dense(x, batch=None, max_nodes=None):
    if batch is None and max_nodes is None:
        return x.unsqueeze(0), torch.ones(1, x.size(0), dtype=torch.bool)
    if batch is None:
        batch = x.new_zeros(x.size(0), dtype=torch.long)
    size = int(batch.max()) + 1
    nodes = _count(batch, size)
    starts = torch.cat([nodes.new_zeros(1), nodes.cumsum(0)])
    if max_nodes is None:
        max_nodes = int(nodes.max())
    place = torch.arange(batch.size(0)) - starts[batch]
    out = x.new_zeros(size * max_nodes + 1, x.size(1))
    out[place + batch * max_nodes] = x
    mask = torch.zeros(size * max_nodes + 1, dtype=torch.bool)
    mask[place + batch * max_nodes] = True
    return (out[:size * max_nodes].view(size, max_nodes, x.size(1)),
            mask[:size * max_nodes].view(size, max_nodes))


class DenseMean(torch.nn.Module):
    def forward(self, x, batch):
        out, mask = _dense(x, batch)
        return out.sum(1) / mask.sum(1, keepdim=True)


def _graphs(sizes, features=3):
    batch = torch.cat([torch.full((n,), i) for i, n in enumerate(sizes)])
    return torch.randn(len(batch), features), batch


def test_a_specialised_test_of_python_values_is_decided_as_torch_export_decides_it():
    torch.manual_seed(0)
    model = DenseMean()
    program = stitch.export(model, _graphs([2, 3, 1]), examples=[(_graphs([2, 3, 1, 2, 1]), {})])
    for sizes in ([1], [4, 4], [1, 2, 3, 4, 5, 6]):
        x, batch = _graphs(sizes)
        torch.testing.assert_close(program(x, batch), model(x, batch), rtol=0, atol=0)
    line = inspect.getsourcelines(_dense)[1] + 1  # ``if batch is None and max_nodes is None``
    at = [d for d in program.report.decisions if d.location.endswith(f":{line}")]
    assert [d.action for d in at] == [Action.TRACED], program.report
    assert "a test of Python values" in at[0].reason


def test_a_specialised_test_of_data_stays_refused():
    class Peaked(torch.nn.Module):
        def forward(self, x):
            if x.max() > 10:  # its other side warns inside an assignment: no cond
                x = _count(x.long().clamp(0, 3), 4).float().sum() + x
            return x * 2

    with pytest.raises(stitch.GuardsRefusedError):
        stitch.export(Peaked(), (torch.randn(4),), examples=[((torch.randn(5),), {})])


class DenseAttend(torch.nn.Module):
    """The dense batch into attention with a padding mask: torch.export cannot trace the
    attention over sizes read from data (a broadcast test on the number of graphs)."""

    def __init__(self):
        super().__init__()
        self.attn = torch.nn.MultiheadAttention(3, 1, batch_first=True)

    def forward(self, x, batch):
        out, mask = _dense(x, batch)
        attended, _ = self.attn(out, out, out, key_padding_mask=~mask, need_weights=False)
        return attended.sum(1)


@pytest.mark.slow  # about 45 s: the census and two exports of the attention
def test_an_export_failing_after_a_test_of_python_values_is_refused_for_its_own_reason():
    torch.manual_seed(0)
    with pytest.raises(stitch.StitchError) as caught:
        stitch.export(DenseAttend().eval(), _graphs([2, 3, 1]),
                      examples=[(_graphs([2, 3, 1, 2, 1]), {})])
    # not the guard on ``batch is None``, a Python bool where torch.export traced it
    assert not isinstance(caught.value, stitch.GuardsRefusedError), caught.value
    line = inspect.getsourcelines(DenseAttend.forward)[1] + 2  # the attention's line
    assert any(f"{__file__}:{line}" in note for note in caught.value.__notes__)
