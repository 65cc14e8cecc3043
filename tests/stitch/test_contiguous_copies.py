"""``contiguous()`` inside a branch that becomes a cond makes no guard on the layout
(canonicalize/contiguous_copies.py): a window model that pads only ``if padding:`` and
cuts the padding off under the same test (TinyViT's layout) would otherwise serve
the traced example's side of the test only, and refuse the other side."""

from __future__ import annotations

import ast

import torch
import torch.nn.functional as F
from torch import nn

import stitch
from stitch.synthesize.canonicalize.contiguous_copies import contiguous_copies


class PaddedWindows(nn.Module):
    """TinyViT's attention layout on a 4x4 window, the softmax per window standing in for
    attention: padded and cut only where the size is not a whole number of windows."""

    def forward(self, x):
        b, c, h, w = x.shape
        pad_b, pad_r = (4 - h % 4) % 4, (4 - w % 4) % 4
        padding = pad_b > 0 or pad_r > 0
        if padding:
            x = F.pad(x, (0, pad_r, 0, pad_b))
        ph, pw = h + pad_b, w + pad_r
        y = x.view(b, c, ph // 4, 4, pw // 4, 4).permute(0, 2, 4, 1, 3, 5)
        y = y.reshape(-1, 16).softmax(-1)
        y = y.view(b, ph // 4, pw // 4, c, 4, 4).permute(0, 3, 1, 4, 2, 5).reshape(b, c, ph, pw)
        if padding:
            y = y[:, :, :h, :w].contiguous()
        return y * 2


def test_both_sides_of_the_padding_test_are_served():
    model = PaddedWindows()
    examples = [torch.randn(1, 3, 8, 8), torch.randn(2, 3, 8, 8), torch.randn(1, 3, 10, 10)]
    program = stitch.export(model, (examples[0],),
                            examples=[((x,), {}) for x in examples[1:]])
    for h, w in ((8, 8), (12, 16), (9, 13), (10, 10), (13, 8)):
        x = torch.randn(2, 3, h, w)
        torch.testing.assert_close(program(x), model(x), rtol=0, atol=0)


def _cut(y, h, w):
    return y[:, :, :h, :w].contiguous()


class CutByHelper(PaddedWindows):
    """The same, the cut made by a module-level helper the arm calls."""

    def forward(self, x):
        b, c, h, w = x.shape
        pad_b, pad_r = (4 - h % 4) % 4, (4 - w % 4) % 4
        padding = pad_b > 0 or pad_r > 0
        if padding:
            x = F.pad(x, (0, pad_r, 0, pad_b))
        ph, pw = h + pad_b, w + pad_r
        y = x.view(b, c, ph // 4, 4, pw // 4, 4).permute(0, 2, 4, 1, 3, 5)
        y = y.reshape(-1, 16).softmax(-1)
        y = y.view(b, ph // 4, pw // 4, c, 4, 4).permute(0, 3, 1, 4, 2, 5).reshape(b, c, ph, pw)
        if padding:
            y = _cut(y, h, w)
        return y * 2


def test_a_cut_made_in_a_helper_the_arm_calls(monkeypatch):
    """Both sides served. The cond on ``padding`` (the assignment and the first ``if``) is
    kept, though it leaves the one-window sizes refused (a guard of the view, which one arm
    keeps too): no one-arm pass is tried for it; the cut's ``if padding:``, whose cond keeps
    nothing, is the only one tried."""
    import stitch.size_rewrite as size_rewrite

    tried = []
    real = size_rewrite._one_arm
    monkeypatch.setattr(size_rewrite, "_one_arm", lambda exported, again, model, example,
                        sites: tried.append([s.source_line.strip() for s in sites])
                        or real(exported, again, model, example, sites))
    model = CutByHelper()
    examples = [torch.randn(1, 3, 8, 8), torch.randn(2, 3, 8, 8), torch.randn(1, 3, 10, 10)]
    program = stitch.export(model, (examples[0],),
                            examples=[((x,), {}) for x in examples[1:]])
    for h, w in ((8, 8), (12, 16), (9, 13), (10, 10), (13, 8)):
        x = torch.randn(2, 3, h, w)
        torch.testing.assert_close(program(x), model(x), rtol=0, atol=0)
    assert tried and all(lines == ["if padding:"] for lines in tried), tried


def test_every_contiguous_call_is_rewritten_and_only_those():
    source = ("def f(self, x, m):\n"
              "    a = x[:, :3].contiguous()\n"
              "    b = x.t().contiguous(memory_format=torch.contiguous_format)\n"
              "    c = m.contiguous(1)\n"
              "    return self.contiguous\n")
    func = ast.parse(source).body[0]
    contiguous_copies(func, None)
    text = ast.unparse(func)
    assert "__stitch_rt__.contiguous(x[:, :3])" in text
    assert "__stitch_rt__.contiguous(x.t(), memory_format=torch.contiguous_format)" in text
    assert "m.contiguous(1)" in text  # a positional argument: not torch's method
    assert "return self.contiguous" in text


def test_the_runtime_call_is_the_method_outside_an_arm():
    from stitch.synthesize.operators.runtime import contiguous

    x = torch.randn(4, 6)
    assert contiguous(x) is x  # eager: the tensor itself, as the method gives it
    cut = x[:, :3]
    out = contiguous(cut)
    assert out.is_contiguous() and torch.equal(out, cut)

