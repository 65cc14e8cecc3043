"""``contiguous()`` on a tensor whose strides are symbolic makes no guard while stitch
traces (capture/contiguity.py): a model that pads every input to whole windows and cuts
the padding off again (``x[:, :, :H, :W].contiguous()``) is exported by torch.export alone
for the traced example's side only (padded or not), and refuses the other side."""

from __future__ import annotations

import torch
import torch.fx.experimental._config as fx_config
import torch.nn.functional as F
from torch import nn
from torch.export import Dim

import stitch
from capture.contiguity import contiguity_unguarded, known_contiguous


class Windows(nn.Module):
    """Pads height and width up to whole 4x4 windows, a softmax per window, the padding
    cut off: the cut is contiguous exactly where nothing was padded."""

    def forward(self, x):
        b, c, h, w = x.shape
        pb, pr = (4 - h % 4) % 4, (4 - w % 4) % 4
        x = F.pad(x, (0, pr, 0, pb))
        hp, wp = h + pb, w + pr
        y = x.view(b, c, hp // 4, 4, wp // 4, 4).permute(0, 2, 4, 1, 3, 5)
        y = y.reshape(-1, 16).softmax(-1)
        y = y.view(b, hp // 4, wp // 4, c, 4, 4).permute(0, 3, 1, 4, 2, 5)
        return y.reshape(b, c, hp, wp)[:, :, :h, :w].contiguous()


def _export(rule: bool):
    """As stitch exports it here: sizes reasoned about obliviously (no guard on a size
    being 1 inside torch's ops), the rule on or off."""
    dims = ({0: Dim.AUTO, 2: Dim.AUTO, 3: Dim.AUTO},)
    with contiguity_unguarded() if rule else torch.no_grad(), \
            fx_config.patch(backed_size_oblivious=True):
        return torch.export.export(Windows(), (torch.randn(2, 3, 8, 8),),
                                   dynamic_shapes=dims, strict=False)


def _serves(ep, size: int) -> bool:
    x = torch.randn(2, 3, size, size + 4)
    try:
        out = ep.module()(x)
    except AssertionError:  # Guard failed
        return False
    torch.testing.assert_close(out, Windows()(x), rtol=0, atol=0)
    assert out.is_contiguous()
    return True


def test_torch_alone_guards_on_the_traced_side():
    ep = _export(rule=False)  # traced unpadded: the cut taken as already contiguous
    assert _serves(ep, 12)
    assert not _serves(ep, 10)  # a padded size: Guard failed


def test_the_cut_serves_both_sides():
    ep = _export(rule=True)
    for size in (8, 10, 12, 13):
        assert _serves(ep, size)


def test_known_contiguous_asks_the_ranges_only():
    assert known_contiguous(torch.randn(2, 3))
    assert not known_contiguous(torch.randn(4, 6)[:, :3])
    assert known_contiguous(torch.randn(4, 1, 3)[:, :, :])


def test_stitch_exports_the_model_for_every_size():
    model = Windows()
    examples = [torch.randn(2, 3, 8, 8), torch.randn(1, 3, 10, 10), torch.randn(2, 3, 11, 9)]
    program = stitch.export(model, (examples[0],),
                            examples=[((x,), {}) for x in examples[1:]])
    for h, w in ((8, 12), (9, 13), (16, 5), (13, 13)):
        x = torch.randn(2, 3, h, w)
        torch.testing.assert_close(program(x), model(x), rtol=0, atol=0)


def _cut_of_padded(env):
    """A fake ``x[:, :h]`` of an ``x`` of ``p`` rows (p, h symbols both 8 for the example):
    contiguous exactly where p == h."""
    from torch._dynamo.source import ConstantSource
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic

    def size(name):
        symbol = env.create_symbol(8, ConstantSource(name), dynamic_dim=DimDynamic.DYNAMIC)
        return env.create_symintnode(symbol, hint=8)

    with FakeTensorMode(shape_env=env):
        p, h = size("p"), size("h")
        return torch.empty(2, p, 8)[:, :h]


def test_recording_a_cut_layout_makes_no_guard():
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from torch.fx.passes.shape_prop import _extract_tensor_metadata

    env = ShapeEnv()
    cut = _cut_of_padded(env)
    before = len(env.guards)
    _extract_tensor_metadata(cut)  # torch alone: the layout recorded for the hints, guarded
    assert len(env.guards) > before

    env = ShapeEnv()
    cut = _cut_of_padded(env)
    before = len(env.guards)
    with contiguity_unguarded():
        meta = _extract_tensor_metadata(cut)
    assert len(env.guards) == before and meta.memory_format is None
