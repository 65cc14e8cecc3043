"""torch.export as written before any census: taken only for a forward that says nothing and
changes no Python state on the examples; the census path for everything else."""

from __future__ import annotations

import io

import pytest
import torch

import stitch
from capture import memo
from stitch import progress
from stitch.plain_export import FIRST


class Plain(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.lin(x))


class Prints(Plain):
    def forward(self, x):
        h = torch.relu(self.lin(x))
        print("shape", tuple(h.shape))
        return h


class Branches(Plain):
    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0:
            return h * 2
        return h - 1


class Counts(Plain):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.lin(x)


def _examples():
    torch.manual_seed(0)
    return (torch.randn(3, 4),), [((torch.randn(5, 4),), {})]


def test_a_model_torch_export_takes_is_exported_without_a_census():
    args, more = _examples()
    model = Plain()
    program = stitch.export(model, args, examples=more)
    report = program.report
    assert report.graphs_before is None and report.breaks_before is None
    assert FIRST in report.notes and "census" not in report.seconds
    assert {"state", "export", "verify", "total"} <= set(report.seconds)
    assert "not counted" in str(report)
    with torch.no_grad():
        x = torch.randn(7, 4)  # a batch no example had
        torch.testing.assert_close(program(x), model(x))


@pytest.mark.parametrize("model", [Prints, Branches, Counts])
def test_a_model_that_prints_branches_on_data_or_keeps_state_gets_the_census(model, capsys):
    args, more = _examples()
    program = stitch.export(model(), args, examples=more)
    report = program.report
    assert report.graphs_before is not None and report.graphs_before >= 2, str(report)
    assert FIRST not in report.notes and "census" in report.seconds


class PadsToFour(torch.nn.Module):
    """A padding test on a size: rewritten into a cond whose arms give other lengths, so the
    cond's output length is a new (unbacked) size in the graph, which reads no data."""

    def forward(self, x):
        pad = (4 - x.shape[1] % 4) % 4
        if pad > 0:
            x = torch.nn.functional.pad(x, (0, 0, 0, pad))
        return x.view(x.shape[0], -1, 4, x.shape[2]).sum(2)


def test_a_size_test_rewritten_into_a_cond_needs_no_census():
    model = PadsToFour()
    program = stitch.export(model, (torch.randn(2, 8, 3),),
                            examples=[((torch.randn(3, 12, 3),), {})])
    report = program.report
    assert FIRST in report.notes and "census" not in report.seconds, str(report)
    assert report.graph_ops.get("cond", 0) >= 1, report.graph_ops
    for length in (5, 8, 13, 16):  # both sides of the test
        x = torch.randn(2, length, 3)
        torch.testing.assert_close(program(x), model(x), rtol=0, atol=0)


class _SizeCond(torch.nn.Module):
    def __init__(self, reads: bool) -> None:
        super().__init__()
        self.reads = reads

    def forward(self, x):
        def longer(x):
            n = (x[0, 0] > 100).long().item() + 1 if self.reads else 1
            torch._check(n <= x.shape[0])
            return torch.cat([x, x[:n]])

        return torch.cond(x.shape[0] > 4, longer, lambda x: x.clone(), (x,))


@pytest.mark.parametrize("reads", [False, True])
def test_a_read_is_one_made_in_the_graph_or_in_an_arm_not_a_conds_output_size(reads):
    """The cond's arms give other lengths: its output length is an unbacked size bound by
    the cond itself, which is no read; an ``item()`` in an arm is."""
    from stitch.plain_export import _data_reads, _reads_in_arms

    x = torch.randn(6, 3)
    ep = torch.export.export(_SizeCond(reads), (x,), strict=False,
                             dynamic_shapes=({0: torch.export.Dim.AUTO},))
    conds = [n for n in ep.graph.nodes if n.target is torch.ops.higher_order.cond]
    assert conds and "unbacked_bindings" in conds[0].meta  # what made it look like a read
    assert _data_reads(ep) == []
    assert _reads_in_arms(ep.graph_module) is reads


def test_attribute_writes_sees_every_spelling_of_a_set():
    class Sets(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.flag, self.kept, self.other = False, 3, 1

        def forward(self, x):
            self.flag = False  # the same object: still a write
            setattr(self, "named", 1)  # noqa: B010 - the form under test
            self.__dict__["other"] = float(x.sum())
            return x + self.kept

    model = Sets()
    with memo.attribute_writes(model) as written:
        model(torch.ones(2))
    assert written == {("", "flag"), ("", "named"), ("", "other")}


def test_stages_add_up_and_the_progress_line_shows_only_on_a_terminal(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    for tty in (True, False):
        stream = Terminal() if tty else io.StringIO()
        monkeypatch.setattr("sys.__stderr__", stream)
        monkeypatch.setattr(progress, "AFTER_S", 0.0)
        monkeypatch.setattr(progress, "TICK_S", 0.01)
        seconds: dict[str, float] = {}
        with progress.export_progress(seconds):
            for _ in range(2):
                with progress.stage("census"):
                    progress.threading.Event().wait(0.05)
        assert seconds["census"] >= 0.1
        assert ("torch.compile on every example" in stream.getvalue()) == tty
        monkeypatch.setenv("STITCH_PROGRESS", "0")
        quiet = Terminal()
        monkeypatch.setattr("sys.__stderr__", quiet)
        with progress.export_progress({}), progress.stage("verify"):
            progress.threading.Event().wait(0.05)
        assert quiet.getvalue() == ""
        monkeypatch.delenv("STITCH_PROGRESS")


class MakesATableOnce(Plain):
    def __init__(self) -> None:
        super().__init__()
        self.table = None

    def forward(self, x):
        if self.table is None:  # made on the first call
            self.table = torch.arange(4.0)
        return torch.relu(self.lin(x)) + self.table


def _two_batches(model):
    torch.manual_seed(0)
    return stitch.export(model, (torch.randn(2, 4),), examples=[((torch.randn(3, 4),), {})])


def test_the_state_analysis_first_calls_serve_as_the_warm_up():
    """A forward that makes nothing lazily: the warm-up's runs of the examples would repeat
    the state analysis's first calls."""
    program = _two_batches(Plain())
    assert "warm-up" not in program.report.seconds
    assert program.report.strategies == ("as written: kept",)


def test_a_forward_that_makes_state_on_its_first_call_is_warmed_up():
    model = MakesATableOnce()
    program = _two_batches(model)
    assert "warm-up" in program.report.seconds
    x = torch.randn(5, 4)
    torch.testing.assert_close(program(x), torch.relu(model.lin(x)) + torch.arange(4.0))


def test_a_lazy_module_is_refused_until_it_has_been_called():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.LazyLinear(4), torch.nn.ReLU())
    with pytest.raises(stitch.StitchError, match=r"uninitialized .*0\.weight.*Call the model once"):
        stitch.export(model, (torch.randn(2, 3),))
    assert torch.nn.parameter.is_lazy(model[0].weight)  # the model is left as it was
    model(torch.randn(2, 3))
    program = stitch.export(model, (torch.randn(2, 3),))
    x = torch.randn(2, 3)
    torch.testing.assert_close(program(x), model(x))
