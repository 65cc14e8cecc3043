"""Regional lowering: where Inductor cannot compile the whole graph (an ``.item()`` inside a
cond arm: torch 2.14.1's ``KeyError: 'unbacked_bindings'``), its pieces (straight-line
regions, cond arms, loop tests and bodies) are compiled where that pays on the examples and
the control-flow operators run between them; the candidate is checked and timed like the
others and is built only where the whole graph fails."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import stitch
from capture.inputs import Example
from stitch.lower.regional import regional, regions
from stitch.lower.regional_choice import PieceReason

pytestmark = pytest.mark.slow  # Inductor compiles (about a minute here)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))
from repro_aoti_cond_item import FramesOffset  # noqa: E402 - the repro of the failure


class Straight(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2


def _chain(y):
    for _ in range(8):  # eight passes over the tensor eagerly, one fused by Inductor
        y = y * 1.01 + 0.5
    return y


class HeavyArm(torch.nn.Module):
    def forward(self, x, flag):
        (y,) = torch.cond(flag.sum() > 0, lambda x: (_chain(x),), lambda x: (x - 1,), (x,))
        return y[:2, :2] + 1


class HeavyLoop(torch.nn.Module):
    def forward(self, x, n):
        def body(i, y):
            return i + 1, _chain(y)

        _, y = torch.while_loop(lambda i, y: i < n, body,
                                (torch.zeros((), dtype=torch.int64), x))
        return y[:2, :2]


def _decisions(model, examples):
    module = torch.export.export(model, examples[0], strict=False).module()
    run, decisions = regional(module, [Example(ex, {}) for ex in examples])
    return run, {d.name.split(".")[-1]: d for d in decisions}


def test_the_graph_is_cut_at_each_cond_and_runs_as_the_model():
    model, grid = FramesOffset(), torch.tensor([[2, 3], [1, 4]])
    module = torch.export.export(model, (grid,), strict=False).module()
    split, control = regions(module)
    assert len(control) == 2  # one cond per row of the grid, each a region of its own
    examples = [Example((torch.tensor(g),), {}) for g in ([[2, 3], [1, 4]], [[1, 5], [3, 2]])]
    run, decisions = regional(module, examples)
    # three regions and four arms, each decided; both sides of both conds are reached
    assert sorted(d.kind for d in decisions) == ["cond arm"] * 4 + ["region"] * 3
    assert all(d.reason is not PieceReason.NOT_REACHED for d in decisions), decisions
    for g in ([[2, 3], [1, 4]], [[1, 5], [3, 2]], [[3, 1], [2, 2]]):
        g = torch.tensor(g)
        assert torch.equal(run(g), model(g))


def test_auto_deploys_regions_where_inductor_fails_on_the_whole_graph():
    model, grid = FramesOffset(), torch.tensor([[2, 3], [1, 4]])
    program = stitch.export(model, (grid,), examples=[((torch.tensor([[1, 5], [3, 2]]),), {})])
    compiled = stitch.compile(program, "auto", candidates=["inductor", "regional"], repeats=3)
    by_name = {c.backend: c for c in compiled.decision.candidates}
    assert "regional" in by_name and by_name["regional"].correct, compiled.decision
    for g in ([[2, 3], [1, 4]], [[3, 1], [2, 2]]):
        g = torch.tensor(g)
        torch.testing.assert_close(compiled(g), model(g))


def test_a_graph_without_control_flow_is_not_cut():
    program = stitch.export(Straight(), (torch.randn(2, 3),))
    with pytest.raises(stitch.StitchError, match="holds none"):
        stitch.compile(program, "regional")


def test_an_arm_that_pays_runs_compiled_and_an_arm_no_example_takes_runs_as_exported():
    x = torch.randn(1024, 1024)
    model = HeavyArm()
    run, by = _decisions(model, [(x, torch.ones(2)), (x + 1, torch.full((2,), 3.0))])
    assert by["true_graph_0"].reason is PieceReason.FASTER, by
    assert by["false_graph_0"].reason is PieceReason.NOT_REACHED, by
    for flag in (torch.ones(2), -torch.ones(2)):  # the side no example took, too
        torch.testing.assert_close(run(x, flag), model(x, flag))


def test_a_loop_body_that_pays_runs_compiled():
    x, model = torch.randn(1024, 1024), HeavyLoop()
    run, by = _decisions(model, [(x, torch.tensor(2)), (x, torch.tensor(3))])
    assert by["while_loop_body_graph_0"].reason is PieceReason.FASTER, by
    for n in (0, 1, 4):
        torch.testing.assert_close(run(x, torch.tensor(n)), model(x, torch.tensor(n)))


@pytest.mark.skipif(torch.get_num_threads() < 2, reason="on one thread Inductor emits no "
                    "OpenMP loop at all (OMP_NUM_THREADS=1): nothing to tell apart")
def test_sizes_read_from_data_are_hinted_so_tiny_loops_are_not_parallelised():
    from torch._inductor.utils import run_and_get_code

    from stitch.lower.regional_hints import hinted

    grids = [torch.tensor([[2, 3], [1, 4]]), torch.tensor([[1, 5], [3, 2]])]
    split, _ = regions(torch.export.export(FramesOffset(), (grids[0],), strict=False).module())
    first = split.submod_0  # reads the grid's numbers, then arange(h): a loop over a read
    calls = [(g,) for g in grids]
    plain = torch.compile(first, fullgraph=True)
    _, plain_code = run_and_get_code(plain, *calls[0])
    assert any("#pragma omp parallel" in c for c in plain_code)  # sized as if 8192 long
    with_hints = hinted(first, calls)
    torch._dynamo.reset()
    _, code = run_and_get_code(torch.compile(with_hints, fullgraph=True), *calls[0])
    assert not any("#pragma omp parallel" in c for c in code)
    for args in calls:
        torch.testing.assert_close(with_hints(*args), first(*args))


class NestedArm(torch.nn.Module):
    """A cond whose arm holds a cond of its own between two heavy stretches (torchvision's
    SSD post-processing: a cond over per-image conds)."""

    def forward(self, x, flag):
        def outer(x):
            y = _chain(x)
            (z,) = torch.cond(y.mean() > 0, lambda y: (y * 2,), lambda y: (y - 2,), (y,))
            return (_chain(z),)

        (y,) = torch.cond(flag.sum() > 0, outer, lambda x: (x - 1,), (x,))
        return y[:2, :2] + 1


def test_an_arm_holding_control_flow_is_cut_again():
    model = NestedArm()
    examples = [(torch.randn(256, 256), torch.ones(2)), (torch.randn(256, 256) - 3, torch.ones(2))]
    module = torch.export.export(model, examples[0], strict=False).module()
    run, decisions = regional(module, [Example(ex, {}) for ex in examples])
    names = sorted(d.name for d in decisions)
    inner = [n for n in names if n.startswith("submod_1.true_graph_0.")]
    # the arm's two straight stretches and the inner cond's two arms, each decided
    assert sorted(d.kind for d in decisions if d.name in inner) == \
        ["cond arm", "cond arm", "region", "region"], names
    assert "submod_1.true_graph_0" not in names
    stretch = [d for d in decisions if d.name in inner and d.kind == "region"]
    assert all(d.reason is not PieceReason.NOT_REACHED for d in stretch), decisions
    for ex in examples + [(torch.randn(256, 256), -torch.ones(2))]:
        torch.testing.assert_close(run(*ex), model(*ex))
