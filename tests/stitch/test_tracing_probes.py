"""A model that computes otherwise when it is traced is exported with its tracing probes
answering as in eager (synthesize/operators/tracing_probes.py); verification judges the result."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.compiler import is_compiling

import stitch
from stitch.errors import VerificationError
from stitch.synthesize.operators.tracing_probes import bound_probes


class TracedOtherwise(nn.Module):
    """RecurrentGemma 4.52's pattern: a term left out when compiled."""

    def forward(self, x):
        scale = 1.0
        if not is_compiling():
            scale = torch.sigmoid(x)
        return x * scale


def test_the_eager_computation_is_exported_where_tracing_changes_it():
    x = torch.randn(3, 4)
    model = TracedOtherwise()
    plain = torch.export.export(model, (x,))  # the premise: traced, it computes otherwise
    assert not torch.allclose(plain.module()(x), model(x))
    program = stitch.export(model, (x,), examples=[((-x,), {})])
    for inp in (x, -x, torch.zeros(3, 4)):
        torch.testing.assert_close(program(inp), model(inp))
    assert any("probes answering as in eager" in n for n in program.report.notes)
    assert is_compiling.__module__ == "torch.compiler"  # put back
    assert globals()["is_compiling"] is torch.compiler.is_compiling


def test_the_probes_found_are_those_of_the_model_packages():
    bound = bound_probes(TracedOtherwise())
    assert any(m.__name__ == __name__ and name == "is_compiling" for m, name, _ in bound)
    assert not any(m.__name__.startswith("torch") for m, _, _ in bound)


class RefusedWhenTraced(nn.Module):
    """Informer's pattern (transformers 5): traced, a mask eager skips is built; a layer that
    halves the sequence then refuses the mask's size, so torch.export fails outright."""

    def forward(self, x):
        mask = torch.ones(x.shape[0], x.shape[0]) if is_compiling() else None
        x = torch.relu(x[::2])  # the sequence halved (Informer's distilling convolution)
        if mask is not None and mask.shape[0] != x.shape[0]:
            raise ValueError(f"mask should be of size {x.shape[0]}, is {mask.shape[0]}")
        return x * 2 if mask is None else x + mask.sum()


def test_the_eager_path_is_exported_where_the_traced_path_fails_to_export():
    x = torch.randn(4, 3)
    with pytest.raises(Exception, match="mask should be of size"):  # the premise
        torch.export.export(RefusedWhenTraced(), (x,))
    program = stitch.export(RefusedWhenTraced(), (x,), examples=[((torch.randn(6, 3),), {})])
    for inp in (x, -x, torch.randn(8, 3)):
        torch.testing.assert_close(program(inp), RefusedWhenTraced()(inp))
    assert any("probes answering as in eager" in n for n in program.report.notes)


class Untraceable(nn.Module):
    """Eager's path cannot be traced into one graph here: the refusal stands."""

    def forward(self, x):
        if is_compiling():
            return x * 2
        return torch.from_numpy(np.sort(x.numpy()))  # no graph can hold it


def test_without_a_verified_eager_path_the_first_refusal_stands():
    with pytest.raises(VerificationError, match="differs from eager") as refused:
        stitch.export(Untraceable(), (torch.ones(2),), examples=[((torch.zeros(2),), {})])
    assert "tracing probes (is_torchdynamo_compiling() and the like) answering as in eager: " \
        in str(refused.value)


def test_probes_keep_their_own_answers_in_the_module_that_defines_them():
    """transformers' ``is_tracing`` asks ``is_torchdynamo_compiling`` first and the stream-
    capture checks after (which Dynamo cannot trace): rebinding the probes inside their own
    module made a module whose probes stay traced (``eager_probes``) reach those checks."""
    transformers = pytest.importorskip("transformers")
    from transformers.utils import import_utils

    config = transformers.BertConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=8, vocab_size=16)
    bound = bound_probes(transformers.BertModel(config))
    assert bound, "the model's package binds no probe"
    assert not [(m.__name__, n) for m, n, _ in bound if m is import_utils]
    assert any(m.__name__ == "transformers.masking_utils" and n == "is_tracing"
               for m, n, _ in bound)  # the modules that only use a probe still have it answered


def _site(path: str, kind: str, line: str = "x = f(x)"):
    from capture import BreakKind, BreakSite

    return BreakSite(id="S1", kind=BreakKind(kind), rule="", gb_type="", reason="",
                     filename=path, lineno=1, source_line=line, function="f")


def test_probes_stay_eager_except_where_a_break_has_no_rewrite_then_everywhere(monkeypatch):
    """PaliGemma 5.23's pattern: transformers' ContextVar wrapper (no rewrite) and its mask
    helpers (a branch) both break on the eager path; only the wrapper's module goes back to
    its traced answers first, so the mask stays eager's; where that try is refused, every
    module with a break does (the step taken before)."""
    import contextlib
    import types

    import stitch.probe_retry as retry
    from stitch.errors import UnfixableBreaksError

    wrapper, masks, other = (types.SimpleNamespace(__file__=f) for f in
                             ("/p/capture.py", "/p/masks.py", "/p/other.py"))
    bound = [(wrapper, "is_tracing", "p"), (masks, "is_tracing", "p"), (other, "f", "p")]
    both = [_site("/p/capture.py", "unsupported_call"), _site("/p/masks.py", "branch")]
    assert retry._kept(bound, both) == (bound[1:], bound[2:])
    assert retry._kept(bound[1:], both[1:]) == (bound[2:], bound[2:])
    assert retry._kept(bound, [_site("/elsewhere.py", "unsupported_call")]) == (bound, bound)

    answered: list[int] = []  # how many probes each try answered as in eager
    monkeypatch.setattr(retry, "answered_as_eager",
                        lambda b: answered.append(len(b)) or contextlib.nullcontext())
    outcomes = [UnfixableBreaksError("2 breaks", sites=both), VerificationError("narrow"),
                VerificationError("wide")]

    def run():
        raise outcomes.pop(0)

    with pytest.raises(VerificationError, match="first") as refused:
        retry.eager_probes(VerificationError("first"), run, bound)
    assert answered == [3, 2, 1]  # all, then all but the wrapper's, then only the other
    assert "then VerificationError: narrow; then VerificationError: wide" in str(refused.value)
