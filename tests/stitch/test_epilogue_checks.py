"""Checks raised by the epilogue (``Settings.checks``): what stitch does on CUDA, where an
in-graph ``_assert_async`` that fails is a device-side assert ending the CUDA context.
``checks="epilogue"`` forces it on the CPU, so it is tested here without a GPU."""

from __future__ import annotations

import contextlib
import io

import pytest
import torch
from check_models import CheckInBranch

import stitch
from stitch.epilogue import Epilogue, replay
from stitch.settings import Settings

EPILOGUE = Settings(checks="epilogue")


class Checked(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.lin(x)
        print("before", h.sum())
        if torch.isnan(h).any():
            raise ValueError("NaN in h")
        assert h.abs().max().item() < 100, (  # two lines, then a print: the print must
            "scale too large")                # be found on its own line (see _one_line)
        print("after", h.mean())
        return h.relu()


def _ran(fn, x):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            result, error = fn(x), None
        except Exception as e:  # noqa: BLE001
            result, error = None, e
    return result, error, [ln.split()[0] for ln in out.getvalue().splitlines()]


def _asserts(program) -> list[str]:
    """The graph's checks on data (not torch.export's ``_assert_tensor_metadata`` of a
    dtype conversion: a scalar read made a double)."""
    return [str(n.target) for gm in program.exported_program.graph_module.modules()
            if isinstance(gm, torch.fx.GraphModule) for n in gm.graph.nodes
            if "assert" in str(n.target) and "tensor_metadata" not in str(n.target)]


@pytest.fixture(scope="module")
def pair():
    torch.manual_seed(0)
    model = Checked().eval()
    return model, stitch.export(model, (torch.randn(2, 8),), settings=EPILOGUE)


def test_checks_leave_the_graph_and_raise_after_it_in_order(pair):
    model, program = pair
    assert _asserts(program) == []
    assert [e.kind for e in program.epilogue.entries] == ["print", "check", "check", "print"]
    checks = [d for d in program.report.decisions if "epilogue raises" in d.reason]
    assert [d.location.rsplit(":", 1)[0] for d in checks] == [__file__, __file__]
    for x, error in [(torch.randn(2, 8), None), (torch.full((2, 8), 1e4), AssertionError),
                     (torch.full((2, 8), float("nan")), ValueError)]:
        got, got_error, got_printed = _ran(program, x)
        want, want_error, want_printed = _ran(model, x)
        assert type(got_error) is type(want_error) and (error is None) == (want_error is None)
        # pytest's assert rewriting appends its explanation to the eager message
        assert str(got_error).splitlines()[:1] == str(want_error).splitlines()[:1]
        assert got_printed == want_printed  # "before" replayed, "after" not, when it fails
        if error is None:
            torch.testing.assert_close(got, want)


def test_a_saved_epilogue_raises_the_same(pair):
    model, program = pair
    loaded = Epilogue.from_json(program.epilogue.to_json())
    x = torch.full((2, 8), 1e4)
    with torch.no_grad():
        _out, extras = program.exported_program.module()(x)
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(AssertionError,
                                                                  match="scale too large"):
        replay(loaded, extras)


def test_cpu_checks_stay_in_the_graph_by_default():
    torch.manual_seed(0)
    program = stitch.export(Checked().eval(), (torch.randn(2, 8),))
    assert [e.kind for e in program.epilogue.entries] == ["print", "print"]
    assert len(_asserts(program)) == 2
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(ValueError, match="NaN in h"):
        program(torch.full((2, 8), float("nan")))


def test_a_check_inside_a_branch_stays_in_the_graph():
    """The epilogue sees the top level only: a check in a cond arm keeps its in-graph assert
    (on CUDA that is still a device-side assert; the report's decision says where)."""
    torch.manual_seed(0)
    model = CheckInBranch().eval()
    x = torch.randn(2, 8)
    program = stitch.export(model, (x.abs() * 0 + 1,), examples=[((-x.abs() - 1,), {})],
                            settings=EPILOGUE)
    assert all(e.kind != "check" for e in program.epilogue.entries)
    assert _asserts(program)
    outcomes = []
    for sign in (1.0, -1.0):  # h.sum() > 0 for one of them: that one fails the check
        big = torch.full((2, 8), sign * 1e4)
        _, want_error, _ = _ran(model, big)
        got, got_error, _ = _ran(program, big)
        assert type(got_error) is type(want_error)
        if want_error is None:
            torch.testing.assert_close(got, model(big))
        else:
            assert "scale too large in branch" in str(got_error)
        outcomes.append(want_error is None)
    assert sorted(outcomes) == [False, True]


def test_a_guard_is_raised_by_the_epilogue():
    from test_branch_effects import PrintsInAComprehension, _both_sides

    torch.manual_seed(0)
    model = PrintsInAComprehension().eval()
    pos, neg = _both_sides(model)
    program = stitch.export(model, (neg,), examples=[((pos,), {})],
                            settings=Settings(checks="epilogue", allow_guards=True))
    assert "SpecializationError" in [e.options.get("type") for e in program.epilogue.entries]
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(stitch.SpecializationError):
        program(pos)


def test_an_unknown_check_mode_is_refused():
    with pytest.raises(stitch.StitchError, match="Settings.checks is 'host'"):
        stitch.export(Checked().eval(), (torch.randn(2, 8),), settings=Settings(checks="host"))
