"""Never worse than torch.export: where stitch's rewrites are refused but torch.export takes
the model as written, stitch returns that program, with the epilogue, verified."""

from __future__ import annotations

import contextlib
import io

import pytest
import torch

import stitch
from stitch.plan import Action


class SliceBound(torch.nn.Module):
    """A scalar read that only feeds a slice bound, and a print of it: torch.compile breaks
    on both; torch.export keeps the read as an unbacked SymInt and drops the print. The
    read goes through a function nested in the forward, where stitch's rewrite does not
    follow it: its ``k + 1`` is a tensor there, printed as one, so the rewrite is refused
    (a read in the forward itself, or passed to a module-level helper, prints as the number
    it is)."""

    def forward(self, x):
        def plus_one(k):
            return k + 1

        n = plus_one(x[0].argmax().item())
        print("keeping", n, "columns")
        return x[:, :n] * 2


class DataBranch(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x.sin()
        return x.cos()


def _inputs():
    x = torch.arange(16.0).reshape(2, 8)
    return x, x.flip(1)


def test_a_model_torch_export_takes_is_exported_as_written_with_its_prints():
    x, other = _inputs()
    torch.export.export(SliceBound(), (x,))  # the premise: torch.export alone takes it
    program = stitch.export(SliceBound(), (x,), examples=[((other,), {})])
    actions = {d.action for d in program.report.decisions}
    assert Action.AS_WRITTEN in actions and Action.EPILOGUE in actions, str(program.report)
    assert any("as written" in n for n in program.report.notes)
    for inp, columns in ((x, 8), (other, 1)):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            got = program(inp)
        assert out.getvalue() == f"keeping {columns} columns\n"
        torch.testing.assert_close(got, SliceBound()(inp))


def test_the_fallback_is_not_used_when_the_rewrite_succeeds():
    x, _ = _inputs()
    program = stitch.export(DataBranch(), (x,), examples=[((-x,), {})])
    assert Action.AS_WRITTEN not in {d.action for d in program.report.decisions}
    assert program.report.graph_ops.get("cond", 0) + program.report.graph_ops.get("where", 0)


def test_a_refusal_says_what_torch_export_did_with_the_model():
    class Unexportable(torch.nn.Module):
        def forward(self, x):
            with open("/dev/null", "w") as f:  # noqa: F841 - a call neither can trace
                pass
            if x.sum() > 0:
                return x + 1
            return x - 1

    x, _ = _inputs()
    with pytest.raises(stitch.StitchError) as info:
        stitch.export(Unexportable(), (x,), examples=[((-x,), {})])
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "torch.export of the model as written" in notes, notes


class DrawsNoise(torch.nn.Module):
    """A forward that draws random numbers (VITS's noisy durations, ViT-MAE's masking): the
    program draws the same ones from the same random state, so it is compared from the
    state the model ran from."""

    def forward(self, x):
        noise = torch.rand_like(x)
        keep = torch.randperm(x.shape[-1])[: x.shape[-1] // 2]
        if x.sum() > 0:
            return (x + noise)[..., keep]
        return (x - noise)[..., keep]


def test_a_forward_that_draws_noise_is_verified_from_one_random_state():
    x = torch.randn(2, 8)
    program = stitch.export(DrawsNoise(), (x.abs(),), examples=[((-x.abs(),), {})])
    torch.manual_seed(3)
    got = program(x.abs())
    torch.manual_seed(3)
    torch.testing.assert_close(got, DrawsNoise()(x.abs()))


class ParameterBuffer(torch.nn.Module):
    """A parameter registered as a (non-persistent) buffer, FalconMamba 4.52's ``b_c_rms``:
    torch.export exports it, then fails to put it back on the module ("attribute 'w'
    already exists"); stitch exports the plain tensor it holds."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("w", torch.nn.Parameter(torch.full((4,), 2.0),
                                                     requires_grad=False), persistent=False)
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x) * self.w


def test_a_parameter_registered_as_a_buffer_exports():
    model = ParameterBuffer()
    x = torch.randn(2, 4)
    program = stitch.export(model, (x,))
    torch.testing.assert_close(program(x * 3), model(x * 3))
    assert isinstance(model.w, torch.nn.Parameter)  # the user's model keeps its own


class DeprecatedIndexing(torch.nn.Module):
    """Indexing with a list of slices (Funnel 4.52): eager torch warns from C++ ("Using a
    non-tuple sequence for multidimensional indexing is deprecated ... (Triggered internally
    at ...)"), attributed to the model's line; the graph does not index in Python."""

    def forward(self, x):
        return x[[slice(None), slice(0, 2)]] * 2


def test_torchs_own_warning_about_the_models_code_is_not_the_models_text():
    x = torch.randn(3, 4)
    program = stitch.export(DeprecatedIndexing(), (x,), examples=[((x * 2,), {})])
    torch.testing.assert_close(program(x), DeprecatedIndexing()(x))
