"""The rest of a caller (``caller_continuation``) where PaliGemma's forward needs it: a name
the rest reads that may be unbound when the call is made, and a callee reached under a
local name (transformers' ``mask_interface = ALL_MASK_ATTENTION_FUNCTIONS[...]``)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import stitch


def make_mask(ids, pad=1):
    mask = ids.eq(pad)
    if not mask.any():
        mask = None
    return mask


MASKS = {"padding": make_mask}


class Embeds(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(16, 8)

    def masked(self, ids, mask):
        h = self.embed(ids)
        if mask is not None:
            h = h.masked_fill(mask[..., None], 0.0)
        return h.sum(-1)


class MaybeUnbound(Embeds):
    """``image`` is bound only when pixels are given; the rest after the call reads it only
    then (PaliGemma's ``image_features``)."""

    def forward(self, ids, pixels=None):
        if pixels is not None:
            image = pixels * 2
        mask = make_mask(ids)
        out = self.masked(ids, mask)
        return out + image.sum() if pixels is not None else out


class ThroughALocalName(Embeds):
    def forward(self, ids, kind: str = "padding"):
        build = MASKS[kind]
        mask = build(ids)
        return self.masked(ids, mask)


IDS = torch.tensor([[2, 1, 3, 4]]), torch.tensor([[2, 5, 3, 4]])  # a pad, and none


@pytest.mark.parametrize("cls", [MaybeUnbound, ThroughALocalName])
def test_the_callers_rest_follows(cls):
    torch.manual_seed(0)
    model = cls()
    with_pad, without = IDS
    program = stitch.export(model, (with_pad,), examples=[((without,), {})])
    report = program.report
    assert report.graphs_after == 1, str(report)
    assert not [d for d in report.decisions if d.action.value == "guarded"], str(report)
    for ids in (with_pad, without, torch.ones(1, 4, dtype=torch.long)):
        torch.testing.assert_close(program(ids), model(ids))
    assert MASKS["padding"] is make_mask


def test_a_name_bound_when_the_call_is_made_reaches_the_rest():
    torch.manual_seed(0)
    model = MaybeUnbound()
    with_pad, without = IDS
    pixels = torch.randn(3)
    program = stitch.export(model, (with_pad, pixels), examples=[((without, pixels), {})])
    assert program.report.graphs_after == 1, str(program.report)
    for ids in IDS:
        torch.testing.assert_close(program(ids, pixels), model(ids, pixels))


def test_a_read_of_the_unbound_name_still_raises():
    """The rest's parameter is deleted again where the name was unbound: read, it raises
    as the original function's local would."""
    import ast

    from stitch.synthesize.convert.caller_continuation import _rest_def
    from stitch.synthesize.operators.runtime import UNBOUND

    body = [ast.Return(ast.Name("image", ast.Load()))]
    fn = _rest_def("rest", ["image"], body, {"image"})
    module = ast.Module([ast.fix_missing_locations(fn)], type_ignores=[])
    scope = {"__stitch_rt__": __import__("stitch.synthesize.operators.runtime", fromlist=["x"])}
    exec(compile(ast.fix_missing_locations(module), "<rest>", "exec"), scope)  # noqa: S102
    assert scope["rest"](None, image=3) == 3
    with pytest.raises(UnboundLocalError):
        scope["rest"](None, image=UNBOUND)
