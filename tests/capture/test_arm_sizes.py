"""A cond output whose arms' sizes are the same number under each arm's own condition keeps
that number (capture/arm_sizes.py); torch 2.14 gives it a new size from data."""

from __future__ import annotations

import sympy
import torch
import torch.nn.functional as F
from torch._dynamo.source import ConstantSource
from torch.export import Dim
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

import stitch
from capture.arm_sizes import arm_sizes_merged, equal_under
from capture.tracing_fixes import tracing_fixes

AUTO = {0: Dim.AUTO, 2: Dim.AUTO, 3: Dim.AUTO}


class Rescales(torch.nn.Module):
    """An image brought to 16 x 16 where it is not (timm's CrossViT ``scale_image``)."""

    def forward(self, x):
        h, w = x.shape[-2:]
        x = torch.cond(
            (h != 16) | (w != 16),
            lambda x: F.interpolate(x, size=(16, 16), mode="bilinear"),
            lambda x: x.clone(),
            (x,),
        )
        return x.flatten(1) @ torch.ones(3 * 16 * 16, 2)


def _unbacked(ep) -> bool:
    return any(
        str(s).startswith("u")
        for n in ep.graph.nodes
        for v in [n.meta.get("val")]
        if isinstance(v, torch.Tensor)
        for s in v.shape
        if isinstance(s, torch.SymInt)
    )


def test_the_size_an_arm_condition_fixes_is_the_outputs_size():
    x = torch.randn(2, 3, 16, 16)
    with tracing_fixes():
        ep = torch.export.export(Rescales(), (x,), dynamic_shapes=(AUTO,), strict=False)
    assert not _unbacked(ep), ep.graph  # the output is 16 x 16 on both sides
    for shape in [(1, 3, 16, 16), (2, 3, 20, 24), (3, 3, 9, 16)]:
        y = torch.randn(shape)
        torch.testing.assert_close(ep.module()(y), Rescales()(y), rtol=0, atol=0)


def _size(env, name: str, hint: int) -> torch.SymInt:
    symbol = env.create_symbol(hint, ConstantSource(name), dynamic_dim=DimDynamic.DYNAMIC)
    return env.create_symintnode(symbol, hint=hint)


def test_a_padding_never_negative_and_at_most_zero_is_zero():
    """Windows of 7 over a padded image, the padding cut off after (Swin, TinyViT, Twins):
    the arm that does not cut runs only where the padding is 0, its ``h + pad`` rows are
    ``h``."""
    env = ShapeEnv()
    h = _size(env, "h", 8)
    pad = (7 - h % 7) % 7
    no_padding = sympy.Not((pad > 0).node.expr)
    assert equal_under(env, h + pad, h, [no_padding])
    assert not equal_under(env, h + pad, h, [])
    assert not equal_under(env, h + pad, h, [(pad > 0).node.expr])


def test_a_size_fixed_by_an_equality_is_that_number():
    env = ShapeEnv()
    h, w = _size(env, "h", 16), _size(env, "w", 20)
    not_rescaled = sympy.Not(((h != 16) | (w != 16)).node.expr)
    assert equal_under(env, h, 16, [not_rescaled]) and equal_under(env, w * 3, 48, [not_rescaled])
    assert equal_under(env, h, w, [not_rescaled])  # both 16 there
    assert not equal_under(env, h, 16, [((h != 16) | (w != 16)).node.expr])


def test_without_the_rule_torch_makes_a_size_from_data():
    """What the rule changes: torch alone merges the arms into a new unbacked size."""
    x = torch.randn(2, 3, 16, 16)

    class Plain(torch.nn.Module):
        def forward(self, x):
            h, w = x.shape[-2:]
            return torch.cond(
                (h != 16) | (w != 16),
                lambda x: F.interpolate(x, size=(16, 16), mode="bilinear"),
                lambda x: x.clone(),
                (x,),
            )

    ep = torch.export.export(Plain(), (x,), dynamic_shapes=(AUTO,), strict=False)
    assert _unbacked(ep)
    with arm_sizes_merged():
        ep = torch.export.export(Plain(), (x,), dynamic_shapes=(AUTO,), strict=False)
    assert not _unbacked(ep)


def test_a_condition_that_fixes_nothing_proves_nothing():
    env = ShapeEnv()
    h = _size(env, "h", 20)
    for condition in [(h > 16).node.expr, (h >= 16).node.expr, (h != 16).node.expr]:
        assert not equal_under(env, h, 16, [condition])


class ScaledModel(torch.nn.Module):
    """As a user writes it: a size test that brings the image to the size a layer needs,
    then an assert on that size."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.head = torch.nn.Linear(3 * 16 * 16, 4)

    def forward(self, x):
        h, w = x.shape[-2:]
        if h != 16 or w != 16:
            x = F.interpolate(x, size=(16, 16), mode="bilinear", align_corners=False)
        torch._assert(x.shape[-1] == 16, "the head takes 16 x 16 images")
        return self.head(x.flatten(1))


def test_a_model_brought_to_one_size_is_one_program_for_every_size():
    model = ScaledModel().eval()
    examples = [((torch.randn(2, 3, 16, 16),), {}), ((torch.randn(1, 3, 20, 20),), {})]
    program = stitch.export(model, (torch.randn(1, 3, 16, 16),), examples=examples)
    for shape in [(1, 3, 16, 16), (2, 3, 24, 17), (3, 3, 9, 31)]:
        x = torch.randn(shape)
        torch.testing.assert_close(program(x), model(x), rtol=0, atol=0)
